#pragma once
// The demo's model: a small convolutional network for 28x28 grey images, ten classes.
//   conv 5x5 (16) -> batch norm -> ReLU -> max-pool 2 -> conv 5x5 (32) -> ReLU -> max-pool 2
//   -> linear 512 -> 128 -> ReLU -> linear 128 -> 10 (log-probabilities)
// ~80k parameters; batch norm gives it buffers (running statistics) for DDP to broadcast.
// Given a group, the batch norm is ddp::torch::SyncBatchNorm2d over it (statistics of the
// whole group's batch; same parameters, buffers and state_dict keys), else LibTorch's.
#include <torch/nn/module.h>
#include <torch/nn/modules/container/any.h>
#include <torch/nn/modules/conv.h>
#include <torch/nn/modules/linear.h>
#include <torch/nn/pimpl.h>

#include "comm/process_group.h"

namespace demo {

class CnnImpl : public ::torch::nn::Module {
 public:
  explicit CnnImpl(ddp::comm::ProcessGroupPtr sync_bn = nullptr);
  at::Tensor forward(at::Tensor x);

 private:
  ::torch::nn::Conv2d conv1_{nullptr}, conv2_{nullptr};
  ::torch::nn::AnyModule norm1_;
  ::torch::nn::Linear fc1_{nullptr}, fc2_{nullptr};
};
TORCH_MODULE(Cnn);

}  // namespace demo
