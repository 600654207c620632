#pragma once
// A small multilayer perceptron with its own forward and backward passes (ReLU hidden layers,
// softmax cross-entropy), plus SGD with momentum: the model of the demo job and of the engine's
// equivalence tests. float32, row-major, plain blocked loops; single-threaded.
//
// backward() ADDS to the gradients (so accumulation over micro-batches works) and reports each
// layer as soon as its gradients are final, last layer first: the hook where a data-parallel
// program calls Engine::mark_ready, overlapping communication with the rest of backward.
#include <cstdint>
#include <functional>
#include <vector>

namespace ddp::example {

struct Linear {
  int in = 0;
  int out = 0;
  std::vector<float> weight;  // out x in
  std::vector<float> bias;    // out
  std::vector<float> grad_weight;
  std::vector<float> grad_bias;
};

struct BatchResult {
  double loss = 0;  // mean cross-entropy over the batch
  int correct = 0;  // argmax == label
};

class Mlp {
 public:
  // sizes = {inputs, hidden..., classes}; weights drawn from `seed` (same seed, same model).
  Mlp(const std::vector<int>& sizes, uint64_t seed);

  // x: n x sizes.front(); keeps the activations for backward().
  BatchResult forward(const float* x, const int32_t* labels, int n);
  // Accumulates d(mean loss)/d(parameters) of the last forward() into the gradients. Calls
  // on_layer(l) once layer l's gradients are complete, l = last ... 0.
  void backward(const std::function<void(size_t layer)>& on_layer = {});
  void zero_grad();

  std::vector<Linear>& layers() { return layers_; }
  const std::vector<Linear>& layers() const { return layers_; }
  size_t num_parameters() const;
  // Sum over all weights of w * (1 + position % 7): order-sensitive, printed by the demo.
  double checksum() const;

 private:
  std::vector<Linear> layers_;
  std::vector<std::vector<float>> acts_;  // acts_[0] = input, acts_[l+1] = output of layer l
  std::vector<float> probs_;
  std::vector<int32_t> labels_;
  int batch_ = 0;
};

struct SgdOptions {
  float lr = 0.05f;
  float momentum = 0.9f;
};

class Sgd {
 public:
  explicit Sgd(SgdOptions options) : options_(options) {}
  void step(Mlp& model);
  void set_lr(float lr) { options_.lr = lr; }

 private:
  SgdOptions options_;
  std::vector<std::vector<float>> velocity_;  // per tensor: weights then biases, layer order
};

// C += A * B^T for A: m x k, B: n x k (row-major), blocked for the cache.
void matmul_abt(const float* a, const float* b, float* c, int m, int n, int k);
// C += A^T * B for A: k x m, B: k x n.
void matmul_atb(const float* a, const float* b, float* c, int m, int n, int k);
// C += A * B for A: m x k, B: k x n.
void matmul_ab(const float* a, const float* b, float* c, int m, int n, int k);

}  // namespace ddp::example
