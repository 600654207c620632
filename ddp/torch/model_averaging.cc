#include "ddp/torch/model_averaging.h"

#include <ATen/Functions.h>
#include <c10/core/GradMode.h>
#include <torch/optim/optimizer.h>

#include <utility>

#include "common/error.h"
#include "ddp/torch/tensor_buffer.h"

namespace ddp::torch {

void average_parameters(const std::vector<at::Tensor>& params, comm::ProcessGroup& group) {
  std::vector<at::Tensor> averaged, flat_parts;
  for (const auto& p : params) {
    if (!p.grad().defined()) continue;  // as PyTorch's get_params_to_average
    if (!averaged.empty() && p.scalar_type() != averaged.front().scalar_type()) {
      DDP_THROW(InvalidArgument, "average_parameters: parameters of ", averaged.front().scalar_type(),
                " and ", p.scalar_type(), "; one dtype only");
    }
    averaged.push_back(p);
    flat_parts.push_back(p.detach().reshape(-1));
  }
  if (averaged.empty()) return;
  c10::NoGradGuard no_grad;
  at::Tensor flat = at::cat(flat_parts).div_(group.size());
  group.all_reduce(buffer_of(flat, "average_parameters"), {comm::ReduceOp::kSum})->wait();
  int64_t offset = 0;
  for (auto& p : averaged) {
    p.detach().copy_(flat.narrow(0, offset, p.numel()).view_as(p));
    offset += p.numel();
  }
}

PeriodicModelAverager::PeriodicModelAverager(int64_t period, int64_t warmup_steps,
                                             comm::ProcessGroupPtr group)
    : period_(period), warmup_steps_(warmup_steps), group_(std::move(group)) {
  if (period_ < 1)
    DDP_THROW(InvalidArgument, "PeriodicModelAverager: period must be at least 1, got ", period_);
  if (warmup_steps_ < 0) {
    DDP_THROW(InvalidArgument, "PeriodicModelAverager: warmup_steps must not be negative, got ",
              warmup_steps_);
  }
  DDP_CHECK(group_ != nullptr, "PeriodicModelAverager: no group");
}

void PeriodicModelAverager::average_parameters(const std::vector<at::Tensor>& params) {
  if (step_ >= warmup_steps_ && (step_ - warmup_steps_) % period_ == 0)
    ddp::torch::average_parameters(params, *group_);
  ++step_;
}

PostLocalSGDOptimizer::PostLocalSGDOptimizer(std::unique_ptr<::torch::optim::Optimizer> optimizer,
                                             PeriodicModelAverager averager)
    : optimizer_(std::move(optimizer)), averager_(std::move(averager)) {
  if (!optimizer_) DDP_THROW(InvalidArgument, "PostLocalSGDOptimizer: no optimizer");
}

PostLocalSGDOptimizer::~PostLocalSGDOptimizer() noexcept = default;

void PostLocalSGDOptimizer::step() {
  optimizer_->step();
  std::vector<at::Tensor> params;
  for (const auto& g : optimizer_->param_groups())
    params.insert(params.end(), g.params().begin(), g.params().end());
  averager_.average_parameters(params);
}

void PostLocalSGDOptimizer::zero_grad() { optimizer_->zero_grad(); }

}  // namespace ddp::torch
