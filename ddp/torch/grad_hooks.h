#pragma once
// GradHooks: "parameter i's gradient is final" from autograd, the way c10d's reducer learns it.
//
// A post hook on each parameter's gradient accumulator (the AccumulateGrad node) runs after
// autograd has added this backward pass's contribution to .grad — unlike Tensor::register_hook,
// which runs before accumulation. Autograd holds accumulators weakly, so this object keeps
// them alive; the destructor removes every hook it added. The callback runs on the thread
// that runs the accumulator (the caller's thread for CPU tensors, a device thread for CUDA
// ones); an exception from it propagates out of backward().
// Parameters must be leaves that require grad (InvalidArgument naming the one that is not).
#include <ATen/core/Tensor.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

namespace torch::autograd {
struct Node;
}

namespace ddp::torch {

class GradHooks {
 public:
  GradHooks(const std::vector<at::Tensor>& params, const std::vector<std::string>& names,
            std::function<void(size_t)> on_ready);
  ~GradHooks() noexcept;
  GradHooks(const GradHooks&) = delete;
  GradHooks& operator=(const GradHooks&) = delete;

 private:
  std::vector<std::shared_ptr<::torch::autograd::Node>> accumulators_;
  std::vector<uintptr_t> keys_;
};

// Queues fn to run once the current backward pass has finished (autograd's final callbacks).
// Only valid from inside a backward pass (a hook).
void queue_after_backward(std::function<void()> fn);

}  // namespace ddp::torch
