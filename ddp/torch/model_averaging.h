#pragma once
// Local SGD for LibTorch: parameters averaged every K steps instead of gradients every step,
// as PyTorch 1.13's PeriodicModelAverager and PostLocalSGDOptimizer
// (torch.distributed.algorithms.model_averaging, torch.distributed.optim); pair them with
// post_local_sgd_hook (ddp/post_local_sgd_hook.h), which keeps gradients local after the warm-up.
// average_parameters: the parameters that have a gradient, flattened (one dtype), divided by the
// group size and all_reduced (summed), copied back in place (PyTorch rebinds p.data instead;
// in place keeps DDP's registration valid). Collective: every rank, same parameters, same
// order. Parameters on the host or on the group's device. Not thread-safe.
// Errors: InvalidArgument for a bad period or warm-up, mixed dtypes; the group's errors.
#include <ATen/core/Tensor.h>

#include <cstdint>
#include <memory>
#include <vector>

#include "comm/process_group.h"

namespace torch::optim {
class Optimizer;
}

namespace ddp::torch {

void average_parameters(const std::vector<at::Tensor>& params, comm::ProcessGroup& group);

class PeriodicModelAverager {
 public:
  PeriodicModelAverager(int64_t period, int64_t warmup_steps, comm::ProcessGroupPtr group);
  // One step: averages `params` when step >= warmup_steps and (step - warmup_steps) % period
  // is 0 (collective then), then counts the step.
  void average_parameters(const std::vector<at::Tensor>& params);
  int64_t step() const { return step_; }
  int64_t period() const { return period_; }

 private:
  int64_t period_, warmup_steps_;
  comm::ProcessGroupPtr group_;
  int64_t step_ = 0;
};

class PostLocalSGDOptimizer {
 public:
  PostLocalSGDOptimizer(std::unique_ptr<::torch::optim::Optimizer> optimizer, PeriodicModelAverager averager);
  ~PostLocalSGDOptimizer() noexcept;
  PostLocalSGDOptimizer(const PostLocalSGDOptimizer&) = delete;
  PostLocalSGDOptimizer& operator=(const PostLocalSGDOptimizer&) = delete;

  // The wrapped optimizer's step, then the averager's step over its parameters.
  void step();
  void zero_grad();
  ::torch::optim::Optimizer& optimizer() { return *optimizer_; }
  PeriodicModelAverager& averager() { return averager_; }

 private:
  std::unique_ptr<::torch::optim::Optimizer> optimizer_;
  PeriodicModelAverager averager_;
};

}  // namespace ddp::torch
