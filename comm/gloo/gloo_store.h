#pragma once
// GlooStore: our rdzv::Store seen as a gloo::rendezvous::Store, so Gloo's connectFullMesh
// exchanges transport addresses through the job's store. Gloo's get() blocks until the key
// exists; ours does the same with the store's timeout. wait() waits for the group's timeout,
// whatever Gloo passes. Store errors propagate unchanged (they
// are already ddp errors naming the key), so a rendezvous that times out is a TimeoutError.
#include <memory>

#include <gloo/rendezvous/store.h>

#include "rendezvous/store.h"

namespace ddp::comm::gloo_backend {

class GlooStore final : public ::gloo::rendezvous::Store {
 public:
  // `wait_timeout`: how long wait() waits for other ranks' keys (the group's timeout),
  // whatever Gloo passes.
  GlooStore(std::shared_ptr<rdzv::Store> store, Millis wait_timeout)
      : store_(std::move(store)), wait_timeout_(wait_timeout) {}

  void set(const std::string& key, const std::vector<char>& data) override;
  std::vector<char> get(const std::string& key) override;
  void wait(const std::vector<std::string>& keys) override;
  void wait(const std::vector<std::string>& keys, const std::chrono::milliseconds& timeout) override;

 private:
  std::shared_ptr<rdzv::Store> store_;
  Millis wait_timeout_;
};

}  // namespace ddp::comm::gloo_backend
