#pragma once
// TorchWork: a c10d::Work that completes when our comm::Works do.
// - track(works, on_success) follows one or more of our Works (issued in order on one group).
//   When the last has finished, on_success runs (copying gathered results into the caller's
//   tensors, for instance) unless one failed; then the c10d Work finishes with the first error
//   (ours: TimeoutError, NetworkError naming the peer, ...) and the future completes with
//   result() or that error, the future first (once wait() returns, the future is complete).
//   Both happen on the thread that finished the last Work; so do the future's callbacks.
// - The tensors passed in stay alive until completion (the callbacks hold the TorchWork).
// - wait()/isCompleted()/exception() are c10d's; getFuture() gives an ivalue::Future of the
//   output tensors, as DDP comm hooks expect. A TimeoutError stays one, worded "... Timed out
//   in ..." as c10d words timeouts (its callers and tests look for that).
#include <ATen/core/ivalue.h>
#include <torch/csrc/distributed/c10d/Work.hpp>

#include <atomic>
#include <functional>
#include <memory>
#include <vector>

#include "comm/work.h"

namespace ddp::torch {

class TorchWork final : public c10d::Work {
 public:
  TorchWork(int rank, c10d::OpType type, std::vector<at::Tensor> outputs,
            std::vector<at::Tensor> keep_alive = {});
  ~TorchWork() override;

  // Starts following `works`; call once, after the ops were issued.
  static void track(const c10::intrusive_ptr<TorchWork>& self, std::vector<comm::WorkPtr> works,
                    std::function<void()> on_success = {});

  // The recv from any source this Work follows writes the sender's rank here.
  void with_source(std::shared_ptr<int> source) { source_ = std::move(source); }
  int sourceRank() const override;

  std::vector<at::Tensor> result() override { return outputs_; }
  c10::intrusive_ptr<c10::ivalue::Future> getFuture() override { return future_; }

 private:
  void complete(std::exception_ptr error);

  std::vector<at::Tensor> outputs_;
  std::vector<at::Tensor> keep_alive_;
  c10::intrusive_ptr<c10::ivalue::Future> future_;
  std::function<void()> on_success_;
  std::atomic<size_t> pending_{0};
  std::mutex error_mu_;
  std::exception_ptr first_error_;
  std::shared_ptr<int> source_;
};

}  // namespace ddp::torch
