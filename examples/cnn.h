#pragma once
// The demo's model: a small convolutional network for 28x28 grey images, ten classes.
//   conv 5x5 (16) -> batch norm -> ReLU -> max-pool 2 -> conv 5x5 (32) -> ReLU -> max-pool 2
//   -> linear 512 -> 128 -> ReLU -> linear 128 -> 10 (log-probabilities)
// ~80k parameters; batch norm gives it buffers (running statistics) for DDP to broadcast.
#include <torch/nn/module.h>
#include <torch/nn/modules/batchnorm.h>
#include <torch/nn/modules/conv.h>
#include <torch/nn/modules/linear.h>
#include <torch/nn/pimpl.h>

namespace demo {

class CnnImpl : public ::torch::nn::Module {
 public:
  CnnImpl();
  at::Tensor forward(at::Tensor x);

 private:
  ::torch::nn::Conv2d conv1_{nullptr}, conv2_{nullptr};
  ::torch::nn::BatchNorm2d norm1_{nullptr};
  ::torch::nn::Linear fc1_{nullptr}, fc2_{nullptr};
};
TORCH_MODULE(Cnn);

}  // namespace demo
