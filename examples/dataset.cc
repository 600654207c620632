#include "examples/dataset.h"

#include <cmath>

namespace ddp::example {

uint64_t mix(uint64_t seed, uint64_t a, uint64_t b) {
  // splitmix64 over the three words.
  uint64_t z = seed + 0x9e3779b97f4a7c15ull * (a + 1) + 0xbf58476d1ce4e5b9ull * (b + 1);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

float uniform01(uint64_t seed, uint64_t a, uint64_t b) {
  return (static_cast<float>(mix(seed, a, b) >> 40) + 0.5f) / static_cast<float>(1ull << 24);
}

float normal(uint64_t seed, uint64_t a, uint64_t b) {
  float u1 = uniform01(seed, a, 2 * b);
  float u2 = uniform01(seed, a, 2 * b + 1);
  return std::sqrt(-2.0f * std::log(u1)) * std::cos(6.2831853f * u2);
}

Dataset::Dataset(int dim, int classes, uint64_t seed, int teacher_hidden)
    : dim_(dim), classes_(classes), hidden_(teacher_hidden), seed_(seed) {
  const uint64_t tseed = mix(seed, 0xfeed, 0);
  w1_.resize(static_cast<size_t>(hidden_) * dim_);
  w2_.resize(static_cast<size_t>(classes_) * hidden_);
  for (size_t i = 0; i < w1_.size(); ++i) w1_[i] = normal(tseed, 1, i) / std::sqrt(static_cast<float>(dim_));
  for (size_t i = 0; i < w2_.size(); ++i) w2_[i] = normal(tseed, 2, i);
}

void Dataset::sample(int64_t index, float* x, int32_t* label) const {
  for (int j = 0; j < dim_; ++j) x[j] = normal(seed_, static_cast<uint64_t>(index) + 1000, j);
  std::vector<float> h(hidden_);
  for (int i = 0; i < hidden_; ++i) {
    float s = 0;
    for (int j = 0; j < dim_; ++j) s += w1_[i * dim_ + j] * x[j];
    h[i] = std::tanh(s);
  }
  int best = 0;
  float best_score = -1e30f;
  for (int c = 0; c < classes_; ++c) {
    float s = 0;
    for (int i = 0; i < hidden_; ++i) s += w2_[c * hidden_ + i] * h[i];
    if (s > best_score) {
      best_score = s;
      best = c;
    }
  }
  *label = best;
}

void Dataset::batch(int64_t first, int n, float* x, int32_t* labels) const {
  for (int i = 0; i < n; ++i) sample(first + i, x + static_cast<size_t>(i) * dim_, labels + i);
}

}  // namespace ddp::example
