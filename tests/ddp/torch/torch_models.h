#pragma once
// Small LibTorch models and data for the ddp::torch suites, and a reference trainer: the same
// model trained in one process on the whole batch, which W ranks of DDP must match.
#include <torch/torch.h>

#include <mutex>
#include <vector>

namespace torch_test {

inline constexpr int64_t kIn = 8;
inline constexpr int64_t kClasses = 4;

// Two layers; `unused` is registered but never called (the unused-parameter branch).
struct TinyNetImpl : ::torch::nn::Module {
  explicit TinyNetImpl(int64_t hidden = 16, bool with_unused = false) {
    fc1 = register_module("fc1", ::torch::nn::Linear(kIn, hidden));
    fc2 = register_module("fc2", ::torch::nn::Linear(hidden, kClasses));
    if (with_unused) unused = register_module("unused", ::torch::nn::Linear(kClasses, kClasses));
  }
  ::torch::Tensor forward(::torch::Tensor x) { return fc2(::torch::relu(fc1(x))); }
  ::torch::nn::Linear fc1{nullptr}, fc2{nullptr}, unused{nullptr};
};
TORCH_MODULE(TinyNet);

struct Batches {
  std::vector<::torch::Tensor> x, y;  // one global batch (all ranks' rows) per step
};

inline Batches make_batches(int steps, int64_t rows, uint64_t seed = 7) {
  auto gen = at::make_generator<at::CPUGeneratorImpl>(seed);
  Batches b;
  for (int s = 0; s < steps; ++s) {
    b.x.push_back(at::randn({rows, kIn}, gen));
    b.y.push_back(at::randint(kClasses, {rows}, gen, at::TensorOptions().dtype(at::kLong)));
  }
  return b;
}

// Rows [rank * per_rank, (rank + 1) * per_rank) of a global batch.
inline ::torch::Tensor shard(const ::torch::Tensor& t, int rank, int64_t per_rank) {
  return t.narrow(0, rank * per_rank, per_rank);
}

// A model with deterministic weights (global RNG seeding is not thread-safe: serialize).
inline TinyNet seeded_net(uint64_t seed, int64_t hidden = 16, bool with_unused = false) {
  static std::mutex mu;
  std::lock_guard<std::mutex> lock(mu);
  ::torch::manual_seed(seed);
  return TinyNet(hidden, with_unused);
}

inline std::vector<::torch::Tensor> snapshot(::torch::nn::Module& m) {
  std::vector<::torch::Tensor> out;
  for (const auto& p : m.parameters()) out.push_back(p.detach().clone());
  return out;
}

inline double max_diff(const std::vector<::torch::Tensor>& a, const std::vector<::torch::Tensor>& b) {
  double d = 0;
  for (size_t i = 0; i < a.size() && i < b.size(); ++i)
    d = std::max(d, (a[i] - b[i]).abs().max().item<double>());
  return a.size() == b.size() ? d : 1e30;
}

}  // namespace torch_test
