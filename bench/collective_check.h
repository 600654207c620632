#pragma once
// What `ddp-bench collective` puts in its buffers and how it knows a result is right, on host
// copies of the buffers (float32, root 0, sum).
//
// Inputs are small integers (exact in float32 for any sum here), different on every rank and
// at every index. Two kinds of check:
// - sampled, around every timed op: prepare() puts, at a few positions that change op by op,
//   the values the op must read (inputs restored) or must overwrite (a sentinel); check()
//   then compares those positions with the exact result. Cheap enough to run inside a timed
//   loop (a handful of loads and stores), and a stale or skipped op fails it: the sentinel
//   stays, or a restored input is not reduced.
// - full, after a freshly filled op: every element of the result.
// Both return "" when right, else the first wrong element with its value and the expected one.
#include <cstddef>
#include <string>
#include <vector>

#include "bench/collective_runners.h"

namespace ddp::bench {

// One op's buffers as the harness sees them on this rank: `in` and `out` sized for the op
// (all_gather: out is count x size; reduce_scatter: in is count x size).
struct OpShape {
  CollOp op = CollOp::kAllReduce;
  int rank = 0;
  int size = 1;
  size_t count = 0;  // per rank, as CollectiveRunner::run takes it
  size_t in_count() const;
  size_t out_count() const;  // 0 when the op works in place
  size_t result_count() const;
};

// The whole input of this rank (and a cleared output).
void fill_inputs(const OpShape& s, std::vector<float>& in, std::vector<float>& out);
// Every element of the result.
std::string check_full(const OpShape& s, const std::vector<float>& in, const std::vector<float>& out);

// The positions op number `k` samples (same on every rank), restored or poisoned by prepare().
class SampledCheck {
 public:
  explicit SampledCheck(const OpShape& s) : s_(s) {}
  void prepare(size_t k, float* in, float* out);
  std::string check(size_t k, const float* in, const float* out) const;
  // A negative control: makes op k's first sampled element wrong (ddp-bench's hidden
  // --inject-wrong-result, which its ctest uses to prove a wrong result is refused).
  void corrupt(size_t k, float* in, float* out) const;

 private:
  size_t position(size_t k, int which) const;  // an index into the result
  OpShape s_;
};

}  // namespace ddp::bench
