#include "rendezvous/hash_store.h"

#include <string>

namespace ddp::rdzv {

void HashStore::wake(const KeyTable::Woken& woken) { ready_.insert(woken.begin(), woken.end()); }

void HashStore::do_set(const std::string& key, const Bytes& value) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    wake(table_.set(key, value));
  }
  cv_.notify_all();
}

Bytes HashStore::do_get(const std::string& key, Millis timeout) {
  std::unique_lock<std::mutex> lock(mu_);
  wait_locked(lock, "get", {key}, timeout);
  return *table_.find(key);
}

int64_t HashStore::do_add(const std::string& key, int64_t delta) {
  KeyTable::AddResult result;
  {
    std::lock_guard<std::mutex> lock(mu_);
    result = table_.add(key, delta);
    wake(result.woken);
  }
  cv_.notify_all();
  return result.value;
}

Bytes HashStore::do_compare_set(const std::string& key, const Bytes& expected, const Bytes& desired) {
  KeyTable::CompareSetResult result;
  {
    std::lock_guard<std::mutex> lock(mu_);
    result = table_.compare_set(key, expected, desired);
    wake(result.woken);
  }
  cv_.notify_all();
  return result.value;
}

bool HashStore::do_check(const std::vector<std::string>& keys) {
  std::lock_guard<std::mutex> lock(mu_);
  return table_.missing(keys).empty();
}

void HashStore::do_wait(const std::vector<std::string>& keys, Millis timeout) {
  std::unique_lock<std::mutex> lock(mu_);
  wait_locked(lock, "wait", keys, timeout);
}

bool HashStore::do_delete_key(const std::string& key) {
  std::lock_guard<std::mutex> lock(mu_);
  return table_.erase(key);
}

int64_t HashStore::do_num_keys() {
  std::lock_guard<std::mutex> lock(mu_);
  return static_cast<int64_t>(table_.size());
}

// Returns with every key present (checked under the lock, so a key deleted between the write
// that woke us and now parks us again).
void HashStore::wait_locked(std::unique_lock<std::mutex>& lock, const std::string& op,
                            const std::vector<std::string>& keys, Millis timeout) {
  const auto deadline = Clock::now() + timeout;
  const KeyTable::WaiterId ticket = next_ticket_++;
  while (!table_.wait(ticket, keys)) {
    if (!cv_.wait_until(lock, deadline, [&] { return ready_.erase(ticket) > 0; })) {
      table_.cancel(ticket);
      throw_wait_timeout(op, table_.missing(keys), timeout);
    }
  }
}

}  // namespace ddp::rdzv
