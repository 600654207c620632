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

// One op's buffers as the harness sees them on this rank: `in` and `out` sized for the op as
// CollectiveRunner::run takes them, the same on every rank (gather's output and scatter's input
// too, which only the root's op uses).
struct OpShape {
  CollOp op = CollOp::kAllReduce;
  int rank = 0;
  int size = 1;
  size_t count = 0;  // per rank, as CollectiveRunner::run takes it
  size_t in_count() const;
  size_t out_count() const;     // 0 when the op works in place
  size_t result_count() const;  // 0 where the op leaves no result: a non-root of reduce and gather
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
  // --inject-wrong-result, which its ctest uses to prove a wrong result is refused). Only on a
  // rank with a result (see injects_wrong_result).
  void corrupt(size_t k, float* in, float* out) const;

 private:
  size_t span() const;                         // how many indices the samples are drawn from
  size_t position(size_t k, int which) const;  // an index into the result
  OpShape s_;
};

// Whether this rank corrupts a result when --inject-wrong-result names rank `asked`: that rank
// where it has a result. A non-root of reduce or gather has none (its input goes into the
// root's): the root corrupts its result in its place, so every op's negative control is a
// wrong result the harness must refuse.
bool injects_wrong_result(const OpShape& s, int asked);

}  // namespace ddp::bench
