#pragma once
// SyncBatchNorm for LibTorch: batch normalization whose batch statistics are those of the
// whole group's batch, as torch.nn.SyncBatchNorm — on the CPU too, and over any backend.
//
//   ddp::torch::SyncBatchNorm2d norm(::torch::nn::BatchNormOptions(16), group);
//   // or: convert the BatchNorm layers of an existing model, before wrapping it in DDP
//   ddp::torch::convert_sync_batchnorm(*model, group);
//
// Training (and when running statistics are not tracked): every rank sums its input and its
// squares per channel and counts its rows; one all_reduce (float64) of [sum, sum of squares,
// count] gives the global mean and biased variance that normalize the input; the running
// statistics take the global mean and the unbiased global variance, with the layer's momentum
// (or the cumulative average when momentum is unset), as LibTorch's BatchNorm. Backward, as
// PyTorch's: the per-channel sums of dy and dy*(x-mean) are all-reduced in one collective to
// form the input gradient; weight and bias get this rank's own gradient (DDP averages them).
// Evaluation with running statistics, and a group of one, is LibTorch's batch_norm.
// A rank with an empty batch takes part with zeros.
//
// Collective: every rank of `group` must run each SyncBatchNorm forward and backward in the
// same order with the same channel count (and the input requiring grad on all or none), or
// the collectives pair up wrongly or time out. Statistics travel on the group's device
// (staged there and back when the input lives elsewhere). The module is otherwise a LibTorch
// BatchNorm (options, parameters, buffers and state_dict keys are the same), so
// checkpoints move between the two. Differs from PyTorch's: the statistics go in one
// all_reduce of sums rather than an all_gather of per-rank mean and invstd (the variance is
// E[x^2] - mean^2 in float64).
// Errors: InvalidArgument for an input of the wrong rank or a global batch of one row per
// channel; the group's errors (timeouts, lost peers) from forward() or backward().
#include <ATen/core/Tensor.h>
#include <torch/nn/modules/batchnorm.h>
#include <torch/nn/pimpl.h>

#include <cstddef>
#include <iosfwd>
#include <memory>

#include "comm/process_group.h"

namespace ddp::torch {

// The differentiable function behind the modules: normalizes `input` (N, C, ...) with the
// statistics over every rank of `group`, then scales by `weight` and shifts by `bias` (both
// optional). running_mean/running_var (optional) are updated in place with `momentum`.
at::Tensor sync_batch_norm(const at::Tensor& input, const at::Tensor& weight, const at::Tensor& bias,
                           const at::Tensor& running_mean, const at::Tensor& running_var, double momentum,
                           double eps, const comm::ProcessGroupPtr& group);

// D = 1 takes (N, C) or (N, C, L), D = 2 (N, C, H, W), D = 3 (N, C, D, H, W).
template <size_t D>
class SyncBatchNormImpl
    : public ::torch::nn::NormImplBase<D, SyncBatchNormImpl<D>, ::torch::nn::BatchNormOptions> {
 public:
  SyncBatchNormImpl(const ::torch::nn::BatchNormOptions& options, comm::ProcessGroupPtr group);
  at::Tensor forward(const at::Tensor& input);
  void pretty_print(std::ostream& stream) const override;
  const comm::ProcessGroupPtr& group() const { return group_; }

 protected:
  void _check_input_dim(const at::Tensor& input) override;

 private:
  comm::ProcessGroupPtr group_;
};

extern template class SyncBatchNormImpl<1>;
extern template class SyncBatchNormImpl<2>;
extern template class SyncBatchNormImpl<3>;

using SyncBatchNorm1dImpl = SyncBatchNormImpl<1>;
using SyncBatchNorm2dImpl = SyncBatchNormImpl<2>;
using SyncBatchNorm3dImpl = SyncBatchNormImpl<3>;
// The holders (what TORCH_MODULE would define, outside namespace torch).
#define DDP_SYNC_BATCH_NORM_HOLDER(Name)                       \
  class Name : public ::torch::nn::ModuleHolder<Name##Impl> {  \
   public:                                                     \
    using ::torch::nn::ModuleHolder<Name##Impl>::ModuleHolder; \
    using Impl = Name##Impl;                                   \
  }
DDP_SYNC_BATCH_NORM_HOLDER(SyncBatchNorm1d);
DDP_SYNC_BATCH_NORM_HOLDER(SyncBatchNorm2d);
DDP_SYNC_BATCH_NORM_HOLDER(SyncBatchNorm3d);
#undef DDP_SYNC_BATCH_NORM_HOLDER

// Replaces every BatchNorm1d/2d/3d below `module` (not `module` itself) with the SyncBatchNorm
// of the same dimension over `group`: same options, training mode, parameter and buffer values
// (copied, on their device and dtype) and requires_grad. Returns how many it replaced. Call it
// before building the optimizer and the DDP wrapper (they hold the old tensors).
// A layer is replaced in its parent's registry and, when the parent is a Sequential,
// ModuleList or ModuleDict, in its list too. A parent's forward that calls a layer through a
// member of its own (`norm1_(x)`) would keep calling the old one, and nothing here can re-point
// that member: such a layer is an InvalidArgument naming it (the layers listed before it in
// the message are replaced already). Declare those members as SyncBatchNorm instead.
size_t convert_sync_batchnorm(::torch::nn::Module& module, const comm::ProcessGroupPtr& group);

}  // namespace ddp::torch
