#pragma once
// C10dStore: PyTorch's c10d::Store seen through our rdzv::Store interface, so our backends meet
// in whatever store torch.distributed.init_process_group built (env://, tcp://, file://, a
// PrefixStore per group, a store written in Python).
//
// Contract: the rdzv::Store contract, with PyTorch's store underneath. get(key, timeout) is a
// wait for the key with that timeout followed by a get; c10d's own timeout still bounds the get.
// Errors PyTorch raises (c10::Error, std::runtime_error, its timeouts) become StoreError, or
// TimeoutError when a wait expired, naming the operation and the key. The wrapped store is
// shared: it lives as long as this adapter. Thread-safe as far as the wrapped store is (every
// c10d store is); a store implemented in Python takes the GIL itself.
#include <c10/util/intrusive_ptr.h>

#include "rendezvous/store.h"

namespace c10d {
class Store;
}

namespace ddp::torch {

class C10dStore final : public rdzv::Store {
 public:
  explicit C10dStore(c10::intrusive_ptr<c10d::Store> store);
  ~C10dStore() override;

 protected:
  void do_set(const std::string& key, const rdzv::Bytes& value) override;
  rdzv::Bytes do_get(const std::string& key, Millis timeout) override;
  int64_t do_add(const std::string& key, int64_t delta) override;
  rdzv::Bytes do_compare_set(const std::string& key, const rdzv::Bytes& expected,
                             const rdzv::Bytes& desired) override;
  bool do_check(const std::vector<std::string>& keys) override;
  void do_wait(const std::vector<std::string>& keys, Millis timeout) override;
  bool do_delete_key(const std::string& key) override;
  int64_t do_num_keys() override;

 private:
  c10::intrusive_ptr<c10d::Store> store_;
};

}  // namespace ddp::torch
