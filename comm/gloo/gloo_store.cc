#include "comm/gloo/gloo_store.h"

namespace ddp::comm::gloo_backend {

void GlooStore::set(const std::string& key, const std::vector<char>& data) {
  store_->set(key, rdzv::Bytes(data.begin(), data.end()));
}

std::vector<char> GlooStore::get(const std::string& key) {
  rdzv::Bytes value = store_->get(key);
  return std::vector<char>(value.begin(), value.end());
}

void GlooStore::wait(const std::vector<std::string>& keys) { store_->wait(keys); }

void GlooStore::wait(const std::vector<std::string>& keys, const std::chrono::milliseconds& timeout) {
  // Gloo passes kNoTimeout (zero) to mean "no timeout of its own": use the store's.
  store_->wait(keys, timeout.count() > 0 ? Millis(timeout.count()) : kUseDefault);
}

}  // namespace ddp::comm::gloo_backend
