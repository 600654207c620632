#include "bench/collective_check.h"

#include "common/error.h"

namespace ddp::bench {
namespace {

constexpr float kSentinel = -1.f;  // inputs are all positive: never a right result
constexpr int kSamples = 3;
constexpr int kRoot = 0;

// Rank r's input at global index g: positive small integers, different per rank.
float input_value(int rank, size_t g) { return static_cast<float>(g % 13) + static_cast<float>(rank + 1); }

float sum_over_ranks(int n, size_t g) {
  return static_cast<float>(n) * static_cast<float>(g % 13) +
         static_cast<float>(n) * static_cast<float>(n + 1) / 2.0f;
}

// The right value of result element i on this rank (block b of a count x size result: from
// rank b).
float expected(const OpShape& s, size_t i) {
  const size_t c = s.count;
  const size_t own = static_cast<size_t>(s.rank) * c;  // this rank's block of a count x size input
  switch (s.op) {
    case CollOp::kAllReduce:
    case CollOp::kReduce: return sum_over_ranks(s.size, i);
    case CollOp::kBroadcast: return input_value(kRoot, i);
    case CollOp::kAllGather:
    case CollOp::kGather: return input_value(static_cast<int>(i / c), i % c);
    case CollOp::kScatter: return input_value(kRoot, own + i);
    case CollOp::kReduceScatter: return sum_over_ranks(s.size, own + i);
    case CollOp::kAllToAll: return input_value(static_cast<int>(i / c), own + i % c);
  }
  return 0;
}

bool in_place(CollOp op) {
  return op == CollOp::kAllReduce || op == CollOp::kBroadcast || op == CollOp::kReduce;
}

const float* result_of(const OpShape& s, const float* in, const float* out) {
  return in_place(s.op) ? in : out;
}

std::string wrong(const OpShape& s, size_t i, float got, const char* how) {
  return detail::str(to_string(s.op), " of ", s.count, " elements per rank, rank ", s.rank, ", ", how,
                     ": element ", i, " is ", got, ", expected ", expected(s, i));
}

}  // namespace

size_t OpShape::in_count() const {
  const bool whole = op == CollOp::kScatter || op == CollOp::kReduceScatter || op == CollOp::kAllToAll;
  return whole ? count * static_cast<size_t>(size) : count;
}

size_t OpShape::out_count() const {
  switch (op) {
    case CollOp::kAllGather:
    case CollOp::kGather:
    case CollOp::kAllToAll: return count * static_cast<size_t>(size);
    case CollOp::kScatter:
    case CollOp::kReduceScatter: return count;
    case CollOp::kAllReduce:
    case CollOp::kBroadcast:
    case CollOp::kReduce: return 0;
  }
  return 0;
}

size_t OpShape::result_count() const {
  if (rank != kRoot && (op == CollOp::kReduce || op == CollOp::kGather)) return 0;
  return in_place(op) ? count : out_count();
}

void fill_inputs(const OpShape& s, std::vector<float>& in, std::vector<float>& out) {
  in.resize(s.in_count());
  out.assign(s.out_count(), kSentinel);
  const bool receives = s.op == CollOp::kBroadcast && s.rank != kRoot;
  for (size_t i = 0; i < in.size(); ++i) in[i] = receives ? kSentinel : input_value(s.rank, i);
}

std::string check_full(const OpShape& s, const std::vector<float>& in, const std::vector<float>& out) {
  const float* r = result_of(s, in.data(), out.data());
  for (size_t i = 0; i < s.result_count(); ++i) {
    if (r[i] != expected(s, i)) return wrong(s, i, r[i], "full check");
  }
  return "";
}

bool injects_wrong_result(const OpShape& s, int asked) {
  if (asked < 0 || asked >= s.size) return false;
  OpShape theirs = s;
  theirs.rank = asked;
  return s.rank == (theirs.result_count() > 0 ? asked : kRoot);
}

// The same on every rank: the result's indices, and reduce's inputs on every rank (a non-root
// has no result, but restores the inputs the root's samples sum). 0: nothing to sample here (a
// non-root of gather, whose input the op only reads).
size_t SampledCheck::span() const { return s_.op == CollOp::kReduce ? s_.count : s_.result_count(); }

size_t SampledCheck::position(size_t k, int which) const {
  const size_t n = span();
  switch (which) {
    case 0: return k % n;                            // walks up from the front
    case 1: return n - 1 - (k % n);                  // and down from the back
    default: return (k * 2654435761u + 12345u) % n;  // and jumps around
  }
}

void SampledCheck::prepare(size_t k, float* in, float* out) {
  if (span() == 0) return;
  for (int w = 0; w < kSamples; ++w) {
    const size_t p = position(k, w);
    switch (s_.op) {
      case CollOp::kAllReduce:
      case CollOp::kReduce: in[p] = input_value(s_.rank, p); break;
      case CollOp::kBroadcast: in[p] = s_.rank == kRoot ? input_value(kRoot, p) : kSentinel; break;
      case CollOp::kReduceScatter:
        // Every rank restores element p of every block: all of them feed result element p.
        for (int b = 0; b < s_.size; ++b) {
          const size_t g = static_cast<size_t>(b) * s_.count + p;
          in[g] = input_value(s_.rank, g);
        }
        out[p] = kSentinel;
        break;
      case CollOp::kAllGather:
      case CollOp::kGather:
      case CollOp::kScatter:
      case CollOp::kAllToAll: out[p] = kSentinel; break;  // the op only reads its input
    }
  }
}

std::string SampledCheck::check(size_t k, const float* in, const float* out) const {
  if (s_.result_count() == 0) return "";
  const float* r = result_of(s_, in, out);
  for (int w = 0; w < kSamples; ++w) {
    const size_t p = position(k, w);
    if (r[p] != expected(s_, p)) return wrong(s_, p, r[p], detail::str("op ", k, " (sampled)").c_str());
  }
  return "";
}

void SampledCheck::corrupt(size_t k, float* in, float* out) const {
  if (s_.result_count() == 0) return;  // nothing to make wrong (injects_wrong_result)
  const size_t p = position(k, 0);
  (in_place(s_.op) ? in : out)[p] = expected(s_, p) + 1;
}

}  // namespace ddp::bench
