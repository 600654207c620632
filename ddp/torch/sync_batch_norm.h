#pragma once
// SyncBatchNorm for LibTorch: batch normalization over the whole group's batch, as
// torch.nn.SyncBatchNorm — on the CPU too, and over any backend. In training (or without running
// statistics) one float64 all_reduce, on the group's device, of the per-channel sums, sums of
// squares and the row count gives the mean and biased variance (E[x^2] - mean^2, where PyTorch
// all_gathers each rank's mean and invstd); backward all-reduces the sums of dy and dy*(x-mean) in
// one collective; weight and bias keep this rank's gradient (DDP averages them). An empty batch
// takes part with zeros. Evaluation with running statistics, and a group of one, is LibTorch's
// BatchNorm, whose options, parameters, buffers and state_dict keys these modules share.
// Collective: every rank of `group` runs each forward and backward in the same order with the
// same channel count (and the input requiring grad on all or none), or the collectives pair up
// wrongly or time out. Errors: InvalidArgument for an input of the wrong rank or a global batch of
// one row per channel; the group's errors (timeouts, lost peers) from forward() or backward().
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
