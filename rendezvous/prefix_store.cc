#include "rendezvous/prefix_store.h"

#include "common/error.h"

namespace ddp::rdzv {

std::unique_ptr<Store> PrefixStore::clone() {
  std::unique_ptr<Store> base = base_->clone();
  if (!base) return nullptr;
  auto out = std::make_unique<PrefixStore>(prefix_, std::shared_ptr<Store>(std::move(base)));
  out->set_timeout(timeout());
  return out;
}

PrefixStore::PrefixStore(std::string prefix, std::shared_ptr<Store> base)
    : Store(base ? base->timeout() : kDefaultStoreTimeout),
      prefix_(std::move(prefix)),
      base_(std::move(base)) {
  DDP_CHECK(base_ != nullptr, "PrefixStore needs an underlying store");
}

std::vector<std::string> PrefixStore::ks(const std::vector<std::string>& keys) const {
  std::vector<std::string> out;
  out.reserve(keys.size());
  for (const auto& key : keys) out.push_back(k(key));
  return out;
}

void PrefixStore::do_set(const std::string& key, const Bytes& value) { base_->set(k(key), value); }
Bytes PrefixStore::do_get(const std::string& key, Millis timeout) { return base_->get(k(key), timeout); }
int64_t PrefixStore::do_add(const std::string& key, int64_t delta) { return base_->add(k(key), delta); }
int64_t PrefixStore::do_ticket(const std::string& key) { return base_->ticket(k(key)); }
int64_t PrefixStore::do_tickets(const std::string& key) { return base_->tickets(k(key)); }
Bytes PrefixStore::do_compare_set(const std::string& key, const Bytes& expected, const Bytes& desired) {
  return base_->compare_set(k(key), expected, desired);
}
std::vector<std::optional<Bytes>> PrefixStore::do_get_present(const std::vector<std::string>& keys) {
  return base_->get_present(ks(keys));
}
bool PrefixStore::do_check(const std::vector<std::string>& keys) { return base_->check(ks(keys)); }
void PrefixStore::do_wait(const std::vector<std::string>& keys, Millis timeout) {
  base_->wait(ks(keys), timeout);
}
bool PrefixStore::do_delete_key(const std::string& key) { return base_->delete_key(k(key)); }
int64_t PrefixStore::do_num_keys() { return base_->num_keys(); }

}  // namespace ddp::rdzv
