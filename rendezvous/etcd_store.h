#pragma once
// EtcdStore: the Store contract (store.h) over etcd's v3 API (EtcdClient), every key under one
// prefix ("/ddp/<run_id>/"), failing over between endpoints; the job's state outlives any node.
// - get/wait: a read, then one watch over the missing keys' span from its revision; one that ends
//   at its deadline parks the watch for the next get/wait of the same keys (slices cost nothing).
// - add/compare_set: a transaction that holds only if the key is as read, looped (compare_set
//   sends it first on the key's absence or value: one request). One lost in flight is decided
//   again; add by a leased marker key ("<prefix>\x01add/<nonce>"): applied once (30 s of tries).
// - num_keys: the keys under the prefix, less add's markers and ticket's keys. Values past etcd's
//   request limit (1.5 MiB by default) are a StoreError with etcd's message.
// - Errors: EtcdClient's; a get/wait past its deadline: TimeoutError naming the keys. Liveness:
//   set_with_lease, client()'s leases, watch_prefix (names relative to the prefix). interrupt()
//   (any thread): the blocked get/wait and every later one end in NetworkError. Thread-safe.
#include <atomic>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "rendezvous/etcd_client.h"
#include "rendezvous/etcd_watch.h"
#include "rendezvous/store.h"

namespace ddp::rdzv {

struct EtcdStoreOptions {
  EtcdClientOptions client;
  std::string prefix = "/ddp/";           // every key of the store is prefix + key
  Millis timeout = kDefaultStoreTimeout;  // get/wait when the caller gives none
};

// The keys under a prefix and the revision they were read at (watch from revision + 1).
struct EtcdSnapshot {
  std::vector<std::pair<std::string, Bytes>> entries;  // keys relative to the store's prefix
  int64_t revision = 0;
};

class EtcdStore final : public Store {
 public:
  explicit EtcdStore(EtcdStoreOptions options);
  // Another store over the same client (one connection), e.g. another run's prefix.
  EtcdStore(std::shared_ptr<EtcdClient> client, std::string prefix, Millis timeout = kDefaultStoreTimeout);
  ~EtcdStore() override;

  EtcdClient& client() { return *client_; }
  const std::shared_ptr<EtcdClient>& shared_client() const { return client_; }
  const std::string& prefix() const { return prefix_; }

  // set(), with the key deleted by etcd when `lease` (EtcdClient::grant_lease) ends.
  void set_with_lease(const std::string& key, const Bytes& value, int64_t lease);
  // Every key starting with `key_prefix` (relative to the store's prefix; "" for all).
  EtcdSnapshot read_prefix(const std::string& key_prefix);
  // The changes to keys starting with `key_prefix` from `start_revision` (0: from now); only
  // their deletions with `deletions_only` (N watchers of N keys put: no N^2 events).
  std::unique_ptr<EtcdWatch> watch_prefix(const std::string& key_prefix, int64_t start_revision = 0,
                                          bool deletions_only = false);
  void interrupt() noexcept override;
  // From now on (any thread), a call etcd does not answer (a NetworkError, not interrupt()) is
  // tried again until `patience` has passed (a get/wait: until its deadline, then a
  // TimeoutError); 0 (the default): not at all. For a rendezvous, where a slow etcd (a burst of
  // joins) should slow the join, not end it: every call here is safe to send again.
  void set_patience(Millis patience) noexcept { patience_ms_ = patience.count(); }
  // The revision at which the first ticket(key) was taken; 0 when none was. One range request;
  // `now`, when given, receives the store's revision as of that read.
  int64_t first_ticket_revision(const std::string& key, int64_t* now = nullptr);
  // A new client (its own connections) of the same members, under the same prefix.
  std::unique_ptr<Store> clone() override;

 protected:
  void do_set(const std::string& key, const Bytes& value) override;
  Bytes do_get(const std::string& key, Millis timeout) override;
  int64_t do_add(const std::string& key, int64_t delta) override;
  Bytes do_compare_set(const std::string& key, const Bytes& expected, const Bytes& desired) override;
  bool do_check(const std::vector<std::string>& keys) override;
  void do_wait(const std::vector<std::string>& keys, Millis timeout) override;
  bool do_delete_key(const std::string& key) override;
  int64_t do_num_keys() override;
  // A key of its own ("<prefix>\x01ticket/<key's length>/<key>/<nonce>"; a put sent again keeps
  // its creation revision), ranked among those created before it: N callers cost N writes, where
  // one counter costs N^2 retried transactions (a rendezvous of 512 nodes). One transaction puts
  // and counts; a put sent again (the key was there) counts again as of its creation.
  int64_t do_ticket(const std::string& key) override;
  int64_t do_tickets(const std::string& key) override;  // the ticket keys' count, one range
  std::vector<std::optional<Bytes>> do_get_present(const std::vector<std::string>& keys) override;

 private:
  struct Current;  // a key's value and mod_revision as read (etcd_store.cc)
  struct Pending;  // a get/wait's watch and what it has seen of its keys (etcd_store.cc)
  class Registered;
  std::string k(const std::string& key) const { return prefix_ + key; }
  Current read(const std::string& key);
  // The keys of `keys` missing now, and the revision they were read at.
  std::vector<std::string> missing(const std::vector<std::string>& keys, int64_t* revision);
  // Blocks until every key exists; returns the value of the last one seen appear.
  void wait_for(const char* op, const std::vector<std::string>& keys, Millis timeout, Bytes* value);
  int64_t add_once(const std::string& key, int64_t delta, const std::string& mark);
  // One transaction where the key is absent or holds `expected` (the common case); else, as
  // its read says, compare_set_from.
  Bytes compare_set_once(const std::string& key, const Bytes& expected, const Bytes& desired);
  // The loop on the key's mod_revision from `cur` (an existing empty value matching an empty
  // `expected`, or a lost transaction read again); NetworkError once `retries` passed.
  Bytes compare_set_from(const std::string& key, const Bytes& expected, const Bytes& desired, Current cur,
                         const Deadline& retries);
  static Current failed_read(const etcd::TxnResponse& r, const std::string& key);
  int64_t count_keys();
  std::string ticket_dir(const std::string& key) const;  // where key's tickets are
  // The tickets under `dir` created at or before `revision`.
  int64_t tickets_until(const std::string& dir, int64_t revision);
  // A new Pending for `keys`: nullptr when they are all there already (*value set for a get).
  std::unique_ptr<Pending> start_wait(const std::vector<std::string>& keys, Bytes* value,
                                      const Deadline& deadline);
  enum class Read { kAll, kCompacted, kDeadline };
  // Reads `p`'s watch until every key is there, its revision was compacted, or the deadline.
  Read read_until(const char* op, Pending& p, const Deadline& deadline);
  // This thread's parked Pending for the same keys and kind of call, if any (taken out).
  std::unique_ptr<Pending> unpark(const std::vector<std::string>& keys, bool get);
  void park(std::unique_ptr<Pending> p);
  // After add's transaction was lost: its value if its marker says it was applied, else
  // nullopt with *cur read again; NetworkError once `retries` passed.
  std::optional<int64_t> settle_add(const std::string& key, int64_t delta, const std::string& mark,
                                    const Deadline& retries, std::string why, Current* cur);
  // f(), tried again while etcd does not answer, within the patience (set_patience).
  template <typename F>
  auto patiently(F&& f) -> decltype(f());
  std::string marker_key() const;  // a new one per add
  // The markers' lease, granted again as it ages, or when it is `gone` (etcd found it expired).
  int64_t marker_lease(int64_t gone = 0);

  std::shared_ptr<EtcdClient> client_;
  std::string prefix_;
  std::atomic<bool> interrupted_{false};
  std::atomic<int64_t> patience_ms_{0};
  std::mutex watches_mu_;
  std::set<EtcdWatch*> watches_;                  // the get/wait watches open now, for interrupt()
  std::vector<std::unique_ptr<Pending>> parked_;  // guarded by watches_mu_
  std::mutex marker_mu_;
  int64_t marker_lease_ = 0;  // guarded by marker_mu_
  Clock::time_point marker_granted_{};
};

}  // namespace ddp::rdzv
