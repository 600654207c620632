#include "rendezvous/key_table.h"

#include <algorithm>

namespace ddp::rdzv {

KeyTable::Woken KeyTable::set(const std::string& key, Bytes value) {
  data_[key] = std::move(value);
  return wake(key);
}

KeyTable::AddResult KeyTable::add(const std::string& key, int64_t delta) {
  int64_t value = delta;
  if (auto it = data_.find(key); it != data_.end()) {
    value = checked_add(key, parse_counter(key, it->second), delta);
  }
  data_[key] = Store::to_bytes(std::to_string(value));
  return {value, wake(key)};
}

KeyTable::CompareSetResult KeyTable::compare_set(const std::string& key, const Bytes& expected,
                                                 const Bytes& desired) {
  auto it = data_.find(key);
  if (it == data_.end()) {
    if (!expected.empty()) return {expected, {}};  // c10d: a missing key matches only ""
  } else if (it->second != expected) {
    return {it->second, {}};
  }
  data_[key] = desired;
  return {desired, wake(key)};
}

bool KeyTable::erase(const std::string& key) { return data_.erase(key) > 0; }

const Bytes* KeyTable::find(const std::string& key) const {
  auto it = data_.find(key);
  return it == data_.end() ? nullptr : &it->second;
}

std::vector<std::string> KeyTable::missing(const std::vector<std::string>& keys) const {
  std::vector<std::string> out;
  for (const auto& k : keys) {
    if (!data_.count(k)) out.push_back(k);
  }
  return out;
}

bool KeyTable::wait(WaiterId id, const std::vector<std::string>& keys) {
  cancel(id);
  Wait w{keys, {}};
  if (!park(id, w)) return true;
  waits_.emplace(id, std::move(w));
  return false;
}

bool KeyTable::park(WaiterId id, Wait& wait) {
  for (const auto& k : wait.keys) {
    if (!data_.count(k)) {
      parked_[k].push_back(id);
      wait.parked_on = k;
      return true;
    }
  }
  return false;
}

void KeyTable::cancel(WaiterId id) {
  auto it = waits_.find(id);
  if (it == waits_.end()) return;
  auto pit = parked_.find(it->second.parked_on);
  if (pit != parked_.end()) {
    auto& ids = pit->second;
    ids.erase(std::remove(ids.begin(), ids.end(), id), ids.end());
    if (ids.empty()) parked_.erase(pit);
  }
  waits_.erase(it);
}

// The waits parked on `key`, after a write to it: complete ones are returned (in the order
// they parked), the rest park under their next missing key.
KeyTable::Woken KeyTable::wake(const std::string& key) {
  auto pit = parked_.find(key);
  if (pit == parked_.end()) return {};
  std::vector<WaiterId> ids = std::move(pit->second);
  parked_.erase(pit);
  Woken woken;
  for (WaiterId id : ids) {
    auto it = waits_.find(id);
    if (it == waits_.end()) continue;
    if (park(id, it->second)) continue;
    waits_.erase(it);
    woken.push_back(id);
  }
  return woken;
}

}  // namespace ddp::rdzv
