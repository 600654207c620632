#pragma once
// HashStore: an in-process Store (threads-as-ranks tests, single-process jobs).
// The keys and their rules are a KeyTable; a waiting thread parks its ticket there and sleeps
// on a condition variable until a write completes its wait (or its deadline passes). clone()
// is another handle on the same table (its interrupt() ends only its own waits).
#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <unordered_set>

#include "rendezvous/key_table.h"
#include "rendezvous/store.h"

namespace ddp::rdzv {

class HashStore final : public Store {
 public:
  explicit HashStore(Millis timeout = kDefaultStoreTimeout);

  std::unique_ptr<Store> clone() override;
  void interrupt() noexcept override;

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
  // What every handle of one store shares.
  struct Table {
    std::mutex mu;
    std::condition_variable cv;
    KeyTable keys;
    std::unordered_set<KeyTable::WaiterId> ready;  // tickets whose wait a write completed
    KeyTable::WaiterId next_ticket = 1;
  };
  HashStore(std::shared_ptr<Table> table, Millis timeout);

  void wait_locked(std::unique_lock<std::mutex>& lock, const std::string& op,
                   const std::vector<std::string>& keys, Millis timeout);
  void wake(const KeyTable::Woken& woken);  // under mu; notifies after

  std::shared_ptr<Table> t_;
  std::atomic<bool> interrupted_{false};
};

}  // namespace ddp::rdzv
