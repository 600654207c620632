#pragma once
// KeyTable: the store's rules over one table of keys, for the stores that keep their keys in
// memory (HashStore, the TCP store server).
// - set/add/compare_set/erase follow store.h: add refuses a non-integer or overflow
//   (InvalidArgument naming the key, the value unchanged); compare_set is c10d's rule.
// - Waits are parked, not polled: wait(id, keys) parks the waiter under its first missing key;
//   a write to it returns the waiter in `woken` once all its keys are present, else parks it
//   under its next missing one. A waiter that gives up is cancelled; a delete wakes nobody.
// Not thread-safe: the owner serializes every call (HashStore's mutex, the server's loop
// thread). Waiter ids are the owner's (a connection id, a waiting thread's ticket).
#include <cstdint>
#include <string>
#include <unordered_map>
#include <vector>

#include "rendezvous/store.h"

namespace ddp::rdzv {

class KeyTable {
 public:
  using WaiterId = uint64_t;
  using Woken = std::vector<WaiterId>;  // waits that a write completed
  struct AddResult {
    int64_t value = 0;
    Woken woken;
  };
  struct CompareSetResult {
    Bytes value;  // `desired` when written; else the current value (`expected` when missing)
    Woken woken;
  };

  [[nodiscard]] Woken set(const std::string& key, Bytes value);
  [[nodiscard]] AddResult add(const std::string& key, int64_t delta);
  [[nodiscard]] CompareSetResult compare_set(const std::string& key, const Bytes& expected,
                                             const Bytes& desired);
  bool erase(const std::string& key);

  const Bytes* find(const std::string& key) const;  // null when missing
  std::vector<std::string> missing(const std::vector<std::string>& keys) const;
  size_t size() const { return data_.size(); }

  // True when every key is present (nothing is parked); else parks `id` until a write wakes it.
  bool wait(WaiterId id, const std::vector<std::string>& keys);
  void cancel(WaiterId id);  // a parked wait that gave up; unknown ids are ignored
  size_t parked() const { return waits_.size(); }

 private:
  struct Wait {
    std::vector<std::string> keys;
    std::string parked_on;
  };
  Woken wake(const std::string& key);
  bool park(WaiterId id, Wait& wait);  // false when every key is present

  std::unordered_map<std::string, Bytes> data_;
  std::unordered_map<WaiterId, Wait> waits_;
  std::unordered_map<std::string, std::vector<WaiterId>> parked_;  // key -> waits parked on it
};

}  // namespace ddp::rdzv
