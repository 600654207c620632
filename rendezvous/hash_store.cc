#include "rendezvous/hash_store.h"

#include <string>

namespace ddp::rdzv {

void HashStore::do_set(const std::string& key, const Bytes& value) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    data_[key] = value;
  }
  cv_.notify_all();
}

Bytes HashStore::do_get(const std::string& key, Millis timeout) {
  std::unique_lock<std::mutex> lock(mu_);
  wait_locked(lock, "get", {key}, timeout);
  return data_.at(key);
}

int64_t HashStore::do_add(const std::string& key, int64_t delta) {
  int64_t value = delta;
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = data_.find(key);
    if (it != data_.end()) value = checked_add(key, parse_counter(key, it->second), delta);
    data_[key] = Store::to_bytes(std::to_string(value));
  }
  cv_.notify_all();
  return value;
}

Bytes HashStore::do_compare_set(const std::string& key, const Bytes& expected, const Bytes& desired) {
  Bytes result;
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = data_.find(key);
    if (it == data_.end()) {
      if (!expected.empty()) return expected;  // c10d: missing key and non-empty expected
      data_[key] = desired;
      result = desired;
    } else if (it->second == expected) {
      it->second = desired;
      result = desired;
    } else {
      return it->second;
    }
  }
  cv_.notify_all();
  return result;
}

bool HashStore::do_check(const std::vector<std::string>& keys) {
  std::lock_guard<std::mutex> lock(mu_);
  for (const auto& k : keys) {
    if (!data_.count(k)) return false;
  }
  return true;
}

void HashStore::do_wait(const std::vector<std::string>& keys, Millis timeout) {
  std::unique_lock<std::mutex> lock(mu_);
  wait_locked(lock, "wait", keys, timeout);
}

bool HashStore::do_delete_key(const std::string& key) {
  std::lock_guard<std::mutex> lock(mu_);
  return data_.erase(key) > 0;
}

int64_t HashStore::do_num_keys() {
  std::lock_guard<std::mutex> lock(mu_);
  return static_cast<int64_t>(data_.size());
}

void HashStore::wait_locked(std::unique_lock<std::mutex>& lock, const std::string& op,
                            const std::vector<std::string>& keys, Millis timeout) {
  auto all_present = [&] {
    for (const auto& k : keys) {
      if (!data_.count(k)) return false;
    }
    return true;
  };
  if (!cv_.wait_for(lock, timeout, all_present)) {
    std::vector<std::string> missing;
    for (const auto& k : keys) {
      if (!data_.count(k)) missing.push_back(k);
    }
    throw_wait_timeout(op, missing, timeout);
  }
}

}  // namespace ddp::rdzv
