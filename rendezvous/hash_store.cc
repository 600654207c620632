#include "rendezvous/hash_store.h"

#include <string>

#include "common/error.h"

namespace ddp::rdzv {

HashStore::HashStore(Millis timeout) : HashStore(std::make_shared<Table>(), timeout) {}

HashStore::HashStore(std::shared_ptr<Table> table, Millis timeout) : Store(timeout), t_(std::move(table)) {}

std::unique_ptr<Store> HashStore::clone() {
  return std::unique_ptr<Store>(new HashStore(t_, timeout()));  // the private constructor
}

void HashStore::interrupt() noexcept {
  {
    std::lock_guard<std::mutex> lock(t_->mu);  // a waiter checks the flag under it: no lost wake
    interrupted_ = true;
  }
  t_->cv.notify_all();
}

void HashStore::wake(const KeyTable::Woken& woken) { t_->ready.insert(woken.begin(), woken.end()); }

void HashStore::do_set(const std::string& key, const Bytes& value) {
  {
    std::lock_guard<std::mutex> lock(t_->mu);
    wake(t_->keys.set(key, value));
  }
  t_->cv.notify_all();
}

Bytes HashStore::do_get(const std::string& key, Millis timeout) {
  std::unique_lock<std::mutex> lock(t_->mu);
  wait_locked(lock, "get", {key}, timeout);
  return *t_->keys.find(key);
}

int64_t HashStore::do_add(const std::string& key, int64_t delta) {
  KeyTable::AddResult result;
  {
    std::lock_guard<std::mutex> lock(t_->mu);
    result = t_->keys.add(key, delta);
    wake(result.woken);
  }
  t_->cv.notify_all();
  return result.value;
}

Bytes HashStore::do_compare_set(const std::string& key, const Bytes& expected, const Bytes& desired) {
  KeyTable::CompareSetResult result;
  {
    std::lock_guard<std::mutex> lock(t_->mu);
    result = t_->keys.compare_set(key, expected, desired);
    wake(result.woken);
  }
  t_->cv.notify_all();
  return result.value;
}

bool HashStore::do_check(const std::vector<std::string>& keys) {
  std::lock_guard<std::mutex> lock(t_->mu);
  return t_->keys.missing(keys).empty();
}

void HashStore::do_wait(const std::vector<std::string>& keys, Millis timeout) {
  std::unique_lock<std::mutex> lock(t_->mu);
  wait_locked(lock, "wait", keys, timeout);
}

bool HashStore::do_delete_key(const std::string& key) {
  std::lock_guard<std::mutex> lock(t_->mu);
  return t_->keys.erase(key);
}

int64_t HashStore::do_num_keys() {
  std::lock_guard<std::mutex> lock(t_->mu);
  return static_cast<int64_t>(t_->keys.size());
}

// Returns with every key present (checked under the lock, so a key deleted between the write
// that woke us and now parks us again).
void HashStore::wait_locked(std::unique_lock<std::mutex>& lock, const std::string& op,
                            const std::vector<std::string>& keys, Millis timeout) {
  const auto deadline = Clock::now() + timeout;
  const KeyTable::WaiterId ticket = t_->next_ticket++;
  while (!t_->keys.wait(ticket, keys)) {
    const bool woken =
        t_->cv.wait_until(lock, deadline, [&] { return interrupted_ || t_->ready.erase(ticket) > 0; });
    if (interrupted_) {
      t_->keys.cancel(ticket);
      t_->ready.erase(ticket);
      DDP_THROW(NetworkError, "store ", op, " interrupted (the store handle was closed)");
    }
    if (!woken) {
      t_->keys.cancel(ticket);
      throw_wait_timeout(op, t_->keys.missing(keys), timeout);
    }
  }
}

}  // namespace ddp::rdzv
