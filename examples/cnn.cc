#include "examples/cnn.h"

#include <torch/nn/functional/activation.h>
#include <torch/nn/functional/pooling.h>
#include <torch/nn/modules/batchnorm.h>

#include "ddp/torch/sync_batch_norm.h"

namespace demo {

namespace F = ::torch::nn::functional;

CnnImpl::CnnImpl(ddp::comm::ProcessGroupPtr sync_bn) {
  conv1_ = register_module("conv1", ::torch::nn::Conv2d(::torch::nn::Conv2dOptions(1, 16, 5)));
  if (sync_bn) {
    norm1_ = ::torch::nn::AnyModule(
        register_module("norm1", ddp::torch::SyncBatchNorm2d(::torch::nn::BatchNormOptions(16), sync_bn)));
  } else {
    norm1_ = ::torch::nn::AnyModule(register_module("norm1", ::torch::nn::BatchNorm2d(16)));
  }
  conv2_ = register_module("conv2", ::torch::nn::Conv2d(::torch::nn::Conv2dOptions(16, 32, 5)));
  fc1_ = register_module("fc1", ::torch::nn::Linear(32 * 4 * 4, 128));
  fc2_ = register_module("fc2", ::torch::nn::Linear(128, 10));
}

at::Tensor CnnImpl::forward(at::Tensor x) {
  x = F::max_pool2d(F::relu(norm1_.forward(conv1_(x))), F::MaxPool2dFuncOptions(2));  // 16 x 12 x 12
  x = F::max_pool2d(F::relu(conv2_(x)), F::MaxPool2dFuncOptions(2));                  // 32 x 4 x 4
  x = F::relu(fc1_(x.flatten(1)));
  return F::log_softmax(fc2_(x), F::LogSoftmaxFuncOptions(1));
}

}  // namespace demo
