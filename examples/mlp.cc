#include "examples/mlp.h"

#include <algorithm>
#include <cmath>
#include <stdexcept>

#include "examples/dataset.h"

namespace ddp::example {

namespace {
constexpr int kBlock = 64;
}

void matmul_abt(const float* a, const float* b, float* c, int m, int n, int k) {
  for (int i0 = 0; i0 < m; i0 += kBlock) {
    for (int j0 = 0; j0 < n; j0 += kBlock) {
      for (int i = i0; i < std::min(m, i0 + kBlock); ++i) {
        const float* ai = a + static_cast<size_t>(i) * k;
        for (int j = j0; j < std::min(n, j0 + kBlock); ++j) {
          const float* bj = b + static_cast<size_t>(j) * k;
          float s = 0;
          for (int p = 0; p < k; ++p) s += ai[p] * bj[p];
          c[static_cast<size_t>(i) * n + j] += s;
        }
      }
    }
  }
}

void matmul_atb(const float* a, const float* b, float* c, int m, int n, int k) {
  for (int p = 0; p < k; ++p) {
    const float* ap = a + static_cast<size_t>(p) * m;
    const float* bp = b + static_cast<size_t>(p) * n;
    for (int i = 0; i < m; ++i) {
      const float s = ap[i];
      if (s == 0) continue;
      float* ci = c + static_cast<size_t>(i) * n;
      for (int j = 0; j < n; ++j) ci[j] += s * bp[j];
    }
  }
}

void matmul_ab(const float* a, const float* b, float* c, int m, int n, int k) {
  for (int i = 0; i < m; ++i) {
    float* ci = c + static_cast<size_t>(i) * n;
    for (int p = 0; p < k; ++p) {
      const float s = a[static_cast<size_t>(i) * k + p];
      if (s == 0) continue;
      const float* bp = b + static_cast<size_t>(p) * n;
      for (int j = 0; j < n; ++j) ci[j] += s * bp[j];
    }
  }
}

Mlp::Mlp(const std::vector<int>& sizes, uint64_t seed) {
  if (sizes.size() < 2) throw std::invalid_argument("Mlp needs at least inputs and outputs");
  for (size_t l = 0; l + 1 < sizes.size(); ++l) {
    Linear lin;
    lin.in = sizes[l];
    lin.out = sizes[l + 1];
    lin.weight.resize(static_cast<size_t>(lin.in) * lin.out);
    lin.bias.assign(lin.out, 0.0f);
    const float scale = std::sqrt(2.0f / static_cast<float>(lin.in));  // He initialization
    for (size_t i = 0; i < lin.weight.size(); ++i) lin.weight[i] = normal(seed, 100 + l, i) * scale;
    lin.grad_weight.assign(lin.weight.size(), 0.0f);
    lin.grad_bias.assign(lin.out, 0.0f);
    layers_.push_back(std::move(lin));
  }
}

BatchResult Mlp::forward(const float* x, const int32_t* labels, int n) {
  batch_ = n;
  acts_.resize(layers_.size() + 1);
  acts_[0].assign(x, x + static_cast<size_t>(n) * layers_.front().in);
  for (size_t l = 0; l < layers_.size(); ++l) {
    const Linear& lin = layers_[l];
    auto& out = acts_[l + 1];
    out.assign(static_cast<size_t>(n) * lin.out, 0.0f);
    for (int i = 0; i < n; ++i)
      std::copy(lin.bias.begin(), lin.bias.end(), out.begin() + static_cast<size_t>(i) * lin.out);
    matmul_abt(acts_[l].data(), lin.weight.data(), out.data(), n, lin.out, lin.in);
    if (l + 1 < layers_.size()) {
      for (float& v : out) v = std::max(v, 0.0f);
    }
  }
  const int classes = layers_.back().out;
  probs_ = acts_.back();
  labels_.assign(labels, labels + n);
  BatchResult r;
  for (int i = 0; i < n; ++i) {
    float* p = probs_.data() + static_cast<size_t>(i) * classes;
    const float mx = *std::max_element(p, p + classes);
    int arg = static_cast<int>(std::max_element(p, p + classes) - p);
    float sum = 0;
    for (int c = 0; c < classes; ++c) sum += (p[c] = std::exp(p[c] - mx));
    for (int c = 0; c < classes; ++c) p[c] /= sum;
    r.loss -= std::log(std::max(p[labels[i]], 1e-30f));
    r.correct += arg == labels[i];
  }
  r.loss /= n;
  return r;
}

void Mlp::backward(const std::function<void(size_t)>& on_layer) {
  const int n = batch_;
  const int classes = layers_.back().out;
  std::vector<float> delta = probs_;  // d loss / d logits = (softmax - onehot) / n
  for (int i = 0; i < n; ++i) delta[static_cast<size_t>(i) * classes + labels_[i]] -= 1.0f;
  for (float& d : delta) d /= static_cast<float>(n);
  for (size_t l = layers_.size(); l-- > 0;) {
    Linear& lin = layers_[l];
    matmul_atb(delta.data(), acts_[l].data(), lin.grad_weight.data(), lin.out, lin.in, n);
    for (int i = 0; i < n; ++i) {
      for (int o = 0; o < lin.out; ++o) lin.grad_bias[o] += delta[static_cast<size_t>(i) * lin.out + o];
    }
    if (l > 0) {
      std::vector<float> prev(static_cast<size_t>(n) * lin.in, 0.0f);
      matmul_ab(delta.data(), lin.weight.data(), prev.data(), n, lin.in, lin.out);
      for (size_t i = 0; i < prev.size(); ++i) {
        if (acts_[l][i] <= 0) prev[i] = 0;  // ReLU
      }
      delta.swap(prev);
    }
    if (on_layer) on_layer(l);
  }
}

void Mlp::zero_grad() {
  for (auto& lin : layers_) {
    std::fill(lin.grad_weight.begin(), lin.grad_weight.end(), 0.0f);
    std::fill(lin.grad_bias.begin(), lin.grad_bias.end(), 0.0f);
  }
}

size_t Mlp::num_parameters() const {
  size_t n = 0;
  for (const auto& lin : layers_) n += lin.weight.size() + lin.bias.size();
  return n;
}

double Mlp::checksum() const {
  double s = 0;
  size_t pos = 0;
  for (const auto& lin : layers_) {
    for (float w : lin.weight) s += static_cast<double>(w) * static_cast<double>(1 + pos++ % 7);
    for (float b : lin.bias) s += static_cast<double>(b) * static_cast<double>(1 + pos++ % 7);
  }
  return s;
}

void Sgd::step(Mlp& model) {
  auto& layers = model.layers();
  if (velocity_.empty()) {
    for (const auto& lin : layers) {
      velocity_.emplace_back(lin.weight.size(), 0.0f);
      velocity_.emplace_back(lin.bias.size(), 0.0f);
    }
  }
  auto update = [&](std::vector<float>& w, const std::vector<float>& g, std::vector<float>& v) {
    for (size_t i = 0; i < w.size(); ++i) {
      v[i] = options_.momentum * v[i] + g[i];
      w[i] -= options_.lr * v[i];
    }
  };
  for (size_t l = 0; l < layers.size(); ++l) {
    update(layers[l].weight, layers[l].grad_weight, velocity_[2 * l]);
    update(layers[l].bias, layers[l].grad_bias, velocity_[2 * l + 1]);
  }
}

}  // namespace ddp::example
