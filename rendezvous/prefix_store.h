#pragma once
// PrefixStore: a view of another Store with every key under "<prefix>/". Namespaces process
// groups and restart rounds. Shares ownership of the underlying store; its clone() is a view
// of the base's clone (nullptr when the base has none), its interrupt() the base's.
#include <memory>

#include "rendezvous/store.h"

namespace ddp::rdzv {

class PrefixStore final : public Store {
 public:
  PrefixStore(std::string prefix, std::shared_ptr<Store> base);
  const std::string& prefix() const { return prefix_; }
  const std::shared_ptr<Store>& base() const { return base_; }
  std::unique_ptr<Store> clone() override;
  void interrupt() noexcept override { base_->interrupt(); }

 protected:
  void do_set(const std::string& key, const Bytes& value) override;
  Bytes do_get(const std::string& key, Millis timeout) override;
  int64_t do_add(const std::string& key, int64_t delta) override;
  Bytes do_compare_set(const std::string& key, const Bytes& expected, const Bytes& desired) override;
  bool do_check(const std::vector<std::string>& keys) override;
  void do_wait(const std::vector<std::string>& keys, Millis timeout) override;
  bool do_delete_key(const std::string& key) override;
  int64_t do_num_keys() override;
  int64_t do_ticket(const std::string& key) override;
  int64_t do_tickets(const std::string& key) override;
  std::vector<std::optional<Bytes>> do_get_present(const std::vector<std::string>& keys) override;

 private:
  std::string k(const std::string& key) const { return prefix_ + "/" + key; }
  std::vector<std::string> ks(const std::vector<std::string>& keys) const;

  std::string prefix_;
  std::shared_ptr<Store> base_;
};

}  // namespace ddp::rdzv
