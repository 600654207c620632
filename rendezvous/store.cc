#include "rendezvous/store.h"

#include <algorithm>
#include <charconv>

#include "common/deadline.h"
#include "common/error.h"

namespace ddp::rdzv {

std::unique_ptr<Store> Store::clone() { return nullptr; }

void Store::interrupt() noexcept {}

namespace {

void check_key(const std::string& key) {
  if (key.empty()) DDP_THROW(InvalidArgument, "store key must not be empty");
  if (key.size() > kMaxKeySize) {
    DDP_THROW(InvalidArgument, "store key of ", key.size(), " bytes exceeds the limit of ", kMaxKeySize,
              " (key starts '", key.substr(0, 32), "')");
  }
}

void check_value(const std::string& key, const Bytes& value) {
  if (value.size() > kMaxValueSize) {
    DDP_THROW(InvalidArgument, "store value for '", key, "' of ", value.size(),
              " bytes exceeds the limit of ", kMaxValueSize);
  }
}

}  // namespace

void Store::set(const std::string& key, const Bytes& value) {
  check_key(key);
  check_value(key, value);
  do_set(key, value);
}

Bytes Store::get(const std::string& key, Millis timeout) {
  check_key(key);
  return do_get(key, resolve(timeout));
}

int64_t Store::add(const std::string& key, int64_t delta) {
  check_key(key);
  return do_add(key, delta);
}

int64_t Store::ticket(const std::string& key) {
  check_key(key);
  return do_ticket(key);
}

int64_t Store::tickets(const std::string& key) {
  check_key(key);
  return do_tickets(key);
}

int64_t Store::do_tickets(const std::string& key) {
  if (!do_check({key})) return 0;
  return parse_counter(key, do_get(key, timeout_));
}

Bytes Store::compare_set(const std::string& key, const Bytes& expected, const Bytes& desired) {
  check_key(key);
  check_value(key, desired);
  return do_compare_set(key, expected, desired);
}

bool Store::check(const std::vector<std::string>& keys) {
  for (const auto& k : keys) check_key(k);
  return do_check(keys);
}

void Store::wait(const std::vector<std::string>& keys, Millis timeout) {
  for (const auto& k : keys) check_key(k);
  if (keys.empty()) return;
  do_wait(keys, resolve(timeout));
}

std::vector<std::optional<Bytes>> Store::get_present(const std::vector<std::string>& keys) {
  for (const auto& k : keys) check_key(k);
  return do_get_present(keys);
}

std::vector<std::optional<Bytes>> Store::do_get_present(const std::vector<std::string>& keys) {
  std::vector<std::optional<Bytes>> out;
  out.reserve(keys.size());
  for (const auto& key : keys) {
    if (do_check({key})) {
      out.emplace_back(do_get(key, timeout_));
    } else {
      out.emplace_back(std::nullopt);
    }
  }
  return out;
}

std::vector<Bytes> Store::multi_get(const std::vector<std::string>& keys, Millis timeout) {
  const Deadline deadline(resolve(timeout));
  wait(keys, timeout);
  std::vector<std::optional<Bytes>> present = get_present(keys);
  std::vector<Bytes> out;
  out.reserve(keys.size());
  for (size_t i = 0; i < keys.size(); ++i) {
    // A key deleted since the wait: wait for it again, within the same deadline.
    out.push_back(present[i] ? std::move(*present[i])
                             : get(keys[i], std::max(Millis(1), deadline.remaining())));
  }
  return out;
}

bool Store::delete_key(const std::string& key) {
  check_key(key);
  return do_delete_key(key);
}

int64_t Store::num_keys() { return do_num_keys(); }

std::string Store::get_string(const std::string& key, Millis timeout) { return to_string(get(key, timeout)); }

Bytes first_value(Store& store, const std::string& key, const Bytes& candidate) {
  if (auto now = store.get_present({key}).front()) return std::move(*now);
  return store.compare_set(key, {}, candidate);
}

void throw_wait_timeout(const std::string& op, const std::vector<std::string>& missing, Millis waited) {
  std::string list;
  for (size_t i = 0; i < missing.size() && i < 8; ++i) list += (i ? ", '" : "'") + missing[i] + "'";
  if (missing.size() > 8) list += ", ... (" + std::to_string(missing.size()) + " keys)";
  DDP_THROW(TimeoutError, "store ", op, " timed out after ", waited.count(), " ms waiting for ", list);
}

int64_t parse_counter(const std::string& key, const Bytes& value) {
  int64_t out = 0;
  const char* begin = reinterpret_cast<const char*>(value.data());
  const char* end = begin + value.size();
  auto [ptr, ec] = std::from_chars(begin, end, out);
  if (value.empty() || ec != std::errc() || ptr != end) {
    DDP_THROW(InvalidArgument, "store add('", key, "'): existing value is not an integer");
  }
  return out;
}

int64_t checked_add(const std::string& key, int64_t current, int64_t delta) {
  int64_t out = 0;
  if (__builtin_add_overflow(current, delta, &out)) {
    DDP_THROW(InvalidArgument, "store add('", key, "', ", delta, "): the counter holds ", current,
              " and the sum overflows a 64-bit integer; the value is unchanged");
  }
  return out;
}

}  // namespace ddp::rdzv
