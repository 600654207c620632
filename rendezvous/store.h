#pragma once
// Store: bytes under string keys, the meeting point of every rendezvous. Every implementation
// (HashStore, FileStore, TCPStore, PrefixStore, EtcdStore) keeps this contract, checked by the
// store conformance suite:
// - set overwrites; get blocks until the key exists. add is an atomic int64 counter kept as
//   decimal text (a missing key is 0; a non-integer value or an overflow is InvalidArgument,
//   the value unchanged). compare_set stores `desired` if the value equals `expected` (missing
//   and empty count as equal) and returns the value after the call.
// - Every blocking call has a deadline (kUseDefault: timeout()); expiry is a TimeoutError naming
//   the missing keys and the time waited. Keys and values over kMaxKeySize / kMaxValueSize are
//   InvalidArgument. Thread-safe.
// - clone() opens a second handle on the same data, for a thread that blocks in get/wait (the
//   round watcher); interrupt() ends that thread's wait.
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "common/timeouts.h"

namespace ddp::rdzv {

using Bytes = std::vector<uint8_t>;

inline constexpr size_t kMaxKeySize = 4096;
inline constexpr size_t kMaxValueSize = 64u << 20;

class Store {
 public:
  explicit Store(Millis timeout = kDefaultStoreTimeout) : timeout_(timeout) {}
  virtual ~Store() = default;
  Store(const Store&) = delete;
  Store& operator=(const Store&) = delete;

  void set(const std::string& key, const Bytes& value);
  Bytes get(const std::string& key, Millis timeout = kUseDefault);
  int64_t add(const std::string& key, int64_t delta);
  Bytes compare_set(const std::string& key, const Bytes& expected, const Bytes& desired);
  // How many ticket(key) calls came before this one (0 for the first), each counted once. Read
  // a key's tickets only so: a store keeps them as add(key, 1) does (the default) or as suits it.
  int64_t ticket(const std::string& key);
  // How many ticket(key) calls were made so far (0 for none). Read-only: it never creates a key.
  int64_t tickets(const std::string& key);
  // check: whether every key exists now; wait: blocks until every key exists.
  bool check(const std::vector<std::string>& keys);
  void wait(const std::vector<std::string>& keys, Millis timeout = kUseDefault);
  // Many keys in few requests where the store can (etcd: a transaction per 64 keys), so N nodes
  // reading N registrations cost N requests, not N^2. get_present does not wait (nullopt for a
  // key missing now); multi_get waits for every key, then reads them (c10d's multi_get).
  std::vector<std::optional<Bytes>> get_present(const std::vector<std::string>& keys);
  std::vector<Bytes> multi_get(const std::vector<std::string>& keys, Millis timeout = kUseDefault);
  // Whether the key existed. num_keys counts keys (a PrefixStore the whole store's, as c10d does).
  bool delete_key(const std::string& key);
  int64_t num_keys();

  // String conveniences.
  void set(const std::string& key, const std::string& value) { set(key, to_bytes(value)); }
  std::string get_string(const std::string& key, Millis timeout = kUseDefault);

  // A new handle on the same data, with the same timeout: a connection of its own (TCPStore,
  // EtcdStore), the same file (FileStore), the same table (HashStore), the same prefix over a
  // clone of the base (PrefixStore). nullptr where a store cannot open one (an adapter of another
  // library's store): share this one then. Errors: those of connecting.
  virtual std::unique_ptr<Store> clone();
  // Any thread: the get/wait blocked on this handle now, and every later one, ends with a
  // NetworkError saying so; other calls still work (a PrefixStore: its base's). Meant for a
  // clone that one thread waits on. A store whose clone() is nullptr may ignore it (its waits
  // then end at their deadline).
  virtual void interrupt() noexcept;

  Millis timeout() const { return timeout_; }
  void set_timeout(Millis timeout) { timeout_ = timeout; }

  static Bytes to_bytes(const std::string& s) { return Bytes(s.begin(), s.end()); }
  static std::string to_string(const Bytes& b) { return std::string(b.begin(), b.end()); }

 protected:
  // Implementations: arguments already validated, timeouts already resolved (never kUseDefault).
  virtual void do_set(const std::string& key, const Bytes& value) = 0;
  virtual Bytes do_get(const std::string& key, Millis timeout) = 0;
  virtual int64_t do_add(const std::string& key, int64_t delta) = 0;
  virtual Bytes do_compare_set(const std::string& key, const Bytes& expected, const Bytes& desired) = 0;
  virtual bool do_check(const std::vector<std::string>& keys) = 0;
  virtual void do_wait(const std::vector<std::string>& keys, Millis timeout) = 0;
  virtual bool do_delete_key(const std::string& key) = 0;
  virtual int64_t do_num_keys() = 0;
  virtual int64_t do_ticket(const std::string& key) { return do_add(key, 1) - 1; }
  virtual int64_t do_tickets(const std::string& key);  // default: the counter's value, if any
  // Default: check, then get, key by key.
  virtual std::vector<std::optional<Bytes>> do_get_present(const std::vector<std::string>& keys);

  Millis resolve(Millis timeout) const { return timeout == kUseDefault ? timeout_ : timeout; }

 private:
  Millis timeout_;
};

// Shared by implementations: the TimeoutError for keys that did not appear.
// The key's value, set to `candidate` first where it is missing (the first caller's wins). Reads
// before it writes: for a key nearly every caller finds there, a read costs a store less than a
// compare_set (on etcd a write transaction goes through its log even when its compare fails).
Bytes first_value(Store& store, const std::string& key, const Bytes& candidate);

[[noreturn]] void throw_wait_timeout(const std::string& op, const std::vector<std::string>& missing,
                                     Millis waited);
// Shared by implementations: parses a counter value for add(); InvalidArgument when not an int.
int64_t parse_counter(const std::string& key, const Bytes& value);
// Shared by implementations: current + delta, InvalidArgument (naming the key) on int64 overflow.
int64_t checked_add(const std::string& key, int64_t current, int64_t delta);

}  // namespace ddp::rdzv
