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

void GlooStore::wait(const std::vector<std::string>& keys, const std::chrono::milliseconds&) {
  // Gloo passes its context's timeout, which GlooContext shortens while it connects the mesh
  // (gloo_context.cc): the group's timeout rules the wait for the other ranks.
  store_->wait(keys, wait_timeout_);
}

}  // namespace ddp::comm::gloo_backend
