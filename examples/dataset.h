#pragma once
// A synthetic, learnable classification data set defined by a seed: x ~ N(0, 1)^dim and the
// label is the argmax of a fixed random "teacher" network (dim -> hidden tanh -> classes).
// Sample i depends only on (seed, i), so any rank can produce any shard and a test can rebuild
// the global batch exactly.
#include <cstdint>
#include <vector>

namespace ddp::example {

class Dataset {
 public:
  Dataset(int dim, int classes, uint64_t seed, int teacher_hidden = 16);
  int dim() const { return dim_; }
  int classes() const { return classes_; }
  void sample(int64_t index, float* x, int32_t* label) const;
  // Samples [first, first + n) into x (n x dim) and labels (n).
  void batch(int64_t first, int n, float* x, int32_t* labels) const;

 private:
  int dim_;
  int classes_;
  int hidden_;
  uint64_t seed_;
  std::vector<float> w1_;  // hidden x dim
  std::vector<float> w2_;  // classes x hidden
};

// Counter-based random numbers: deterministic in (seed, a, b).
uint64_t mix(uint64_t seed, uint64_t a, uint64_t b);
float uniform01(uint64_t seed, uint64_t a, uint64_t b);  // (0, 1)
float normal(uint64_t seed, uint64_t a, uint64_t b);

}  // namespace ddp::example
