#pragma once
// HashStore: an in-process Store (threads-as-ranks tests, single-process jobs).
// Waiters sleep on a condition variable and are woken by set/add/compare_set.
#include <condition_variable>
#include <map>
#include <mutex>

#include "rendezvous/store.h"

namespace ddp::rdzv {

class HashStore final : public Store {
 public:
  explicit HashStore(Millis timeout = kDefaultStoreTimeout) : Store(timeout) {}

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
  void wait_locked(std::unique_lock<std::mutex>& lock, const std::string& op,
                   const std::vector<std::string>& keys, Millis timeout);

  std::mutex mu_;
  std::condition_variable cv_;
  std::map<std::string, Bytes> data_;
};

}  // namespace ddp::rdzv
