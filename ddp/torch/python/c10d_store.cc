#include "ddp/torch/python/c10d_store.h"

#include <torch/csrc/distributed/c10d/Store.hpp>

#include <utility>

#include "common/error.h"

namespace ddp::torch {
namespace {

std::string first_key(const std::vector<std::string>& keys) {
  return keys.empty() ? std::string() : keys.front() + (keys.size() > 1 ? ", ..." : "");
}

bool looks_like_timeout(const std::string& what) {
  return what.find("imeout") != std::string::npos || what.find("imed out") != std::string::npos;
}

// Runs one call on the PyTorch store; its errors become ours, naming the call and the key.
template <typename F>
auto guarded(const char* op, const std::string& key, F&& f) -> decltype(f()) {
  try {
    return f();
  } catch (const ddp::Error&) {
    throw;
  } catch (const std::exception& e) {
    const std::string what = e.what();
    const std::string first_line = what.substr(0, what.find('\n'));
    if (looks_like_timeout(what)) {
      DDP_THROW(TimeoutError, "PyTorch store ", op, "(", key, "): ", first_line);
    }
    DDP_THROW(StoreError, "PyTorch store ", op, "(", key, "): ", first_line);
  }
}

}  // namespace

C10dStore::C10dStore(c10::intrusive_ptr<c10d::Store> store)
    : rdzv::Store(store ? Millis(store->getTimeout()) : kDefaultStoreTimeout), store_(std::move(store)) {
  if (!store_) DDP_THROW(InvalidArgument, "C10dStore: the PyTorch store is null");
  if (timeout().count() <= 0) set_timeout(kDefaultStoreTimeout);  // c10d's "no timeout"
}

C10dStore::~C10dStore() = default;

void C10dStore::do_set(const std::string& key, const rdzv::Bytes& value) {
  guarded("set", key, [&] { store_->set(key, value); });
}

rdzv::Bytes C10dStore::do_get(const std::string& key, Millis timeout) {
  do_wait({key}, timeout);
  return guarded("get", key, [&] { return store_->get(key); });
}

int64_t C10dStore::do_add(const std::string& key, int64_t delta) {
  return guarded("add", key, [&] { return store_->add(key, delta); });
}

rdzv::Bytes C10dStore::do_compare_set(const std::string& key, const rdzv::Bytes& expected,
                                      const rdzv::Bytes& desired) {
  return guarded("compare_set", key, [&] { return store_->compareSet(key, expected, desired); });
}

bool C10dStore::do_check(const std::vector<std::string>& keys) {
  return guarded("check", first_key(keys), [&] { return store_->check(keys); });
}

void C10dStore::do_wait(const std::vector<std::string>& keys, Millis timeout) {
  try {
    guarded("wait", first_key(keys), [&] { store_->wait(keys, timeout); });
  } catch (const TimeoutError&) {
    std::vector<std::string> missing;
    for (const auto& k : keys) {
      if (!store_->check({k})) missing.push_back(k);
    }
    rdzv::throw_wait_timeout("wait", missing.empty() ? keys : missing, timeout);
  }
}

bool C10dStore::do_delete_key(const std::string& key) {
  return guarded("delete_key", key, [&] { return store_->deleteKey(key); });
}

int64_t C10dStore::do_num_keys() {
  return guarded("num_keys", "", [&] { return store_->getNumKeys(); });
}

}  // namespace ddp::torch
