#pragma once
// The model ddp-bench torch and hooks time: `layers` x (Linear(hidden, hidden) + ReLU), its
// initial weights drawn after seeding LibTorch's default generator with `seed` (the seed stays set).
#include <torch/nn/modules/activation.h>
#include <torch/nn/modules/container/sequential.h>
#include <torch/nn/modules/linear.h>
#include <torch/utils.h>

namespace ddp::bench {

inline ::torch::nn::Sequential make_mlp(int layers, int hidden, int seed) {
  ::torch::manual_seed(seed);
  ::torch::nn::Sequential model;
  for (int i = 0; i < layers; ++i) {
    model->push_back(::torch::nn::Linear(hidden, hidden));
    model->push_back(::torch::nn::ReLU());
  }
  return model;
}

}  // namespace ddp::bench
