#pragma once
// EtcdStore: the Store contract (store.h) over etcd's v3 API (EtcdClient), every key under one
// prefix ("/ddp/<run_id>/"). The job's state lives in a Raft-replicated cluster, so it outlives
// any node; several endpoints give fail-over between members.
//
// - set is a put; get a range, then, when the key is missing, a watch from the revision of that
//   range until the key appears; wait likewise for several keys (one watch over their span).
//   Neither polls.
// - add and compare_set read the key, then write by a transaction that holds only if the key
//   did not change since (its mod_revision, or create_revision 0 when missing), and loop.
//   A transaction lost in flight (its member died after it went out) is read back: unchanged,
//   it is tried again; changed, compare_set decides again on what it finds, and add, which
//   cannot tell whether its own write is the change, throws NetworkError saying so.
// - num_keys counts the keys under the prefix (a PrefixStore over it counts them all).
// - Values are bounded by etcd's request limit (--max-request-bytes, 1.5 MiB by default):
//   larger ones are a StoreError with etcd's message, not the Store's kMaxValueSize.
// - Errors: those of EtcdClient (etcd unreachable: NetworkError naming the members; not etcd,
//   refused: StoreError); a get/wait past its deadline: TimeoutError naming the keys.
// - For liveness: keys under a lease (set_with_lease; leases from client()), and watch_prefix,
//   whose events (PUT, DELETE: a lease expired) name keys relative to the store's prefix.
// - interrupt() (any thread): the get/wait blocked now, and every later one, ends with a
//   NetworkError; other calls still work (as TCPStore::interrupt).
// Thread-safe.
#include <atomic>
#include <memory>
#include <mutex>
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
  // The changes to keys starting with `key_prefix` from `start_revision` (0: from now).
  std::unique_ptr<EtcdWatch> watch_prefix(const std::string& key_prefix, int64_t start_revision = 0);
  void interrupt() noexcept override;
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

 private:
  struct Current;  // a key's value and mod_revision as read (etcd_store.cc)
  class Registered;
  std::string k(const std::string& key) const { return prefix_ + key; }
  Current read(const std::string& key);
  // The keys of `keys` missing now, and the revision they were read at.
  std::vector<std::string> missing(const std::vector<std::string>& keys, int64_t* revision);
  // Blocks until every key exists; returns the value of the last one seen appear.
  void wait_for(const char* op, const std::vector<std::string>& keys, Millis timeout, Bytes* value);

  std::shared_ptr<EtcdClient> client_;
  std::string prefix_;
  std::atomic<bool> interrupted_{false};
  std::mutex watches_mu_;
  std::set<EtcdWatch*> watches_;  // the get/wait watches open now, for interrupt()
};

}  // namespace ddp::rdzv
