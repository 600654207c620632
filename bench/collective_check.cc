#include "bench/collective_check.h"

#include "common/error.h"

namespace ddp::bench {
namespace {

constexpr float kSentinel = -1.f;  // inputs are all positive: never a right result
constexpr int kSamples = 3;

// Rank r's input at global index g: positive small integers, different per rank.
float input_value(int rank, size_t g) { return static_cast<float>(g % 13) + static_cast<float>(rank + 1); }

float sum_over_ranks(int n, size_t g) {
  return static_cast<float>(n) * static_cast<float>(g % 13) +
         static_cast<float>(n) * static_cast<float>(n + 1) / 2.0f;
}

// The right value of result element i on this rank.
float expected(const OpShape& s, size_t i) {
  switch (s.op) {
    case CollOp::kAllReduce: return sum_over_ranks(s.size, i);
    case CollOp::kBroadcast: return input_value(0, i);
    case CollOp::kAllGather: return input_value(static_cast<int>(i / s.count), i % s.count);
    case CollOp::kReduceScatter: return sum_over_ranks(s.size, static_cast<size_t>(s.rank) * s.count + i);
  }
  return 0;
}

const float* result_of(const OpShape& s, const float* in, const float* out) {
  const bool in_place = s.op == CollOp::kAllReduce || s.op == CollOp::kBroadcast;
  return in_place ? in : out;
}

std::string wrong(const OpShape& s, size_t i, float got, const char* how) {
  return detail::str(to_string(s.op), " of ", s.count, " elements per rank, rank ", s.rank, ", ", how,
                     ": element ", i, " is ", got, ", expected ", expected(s, i));
}

}  // namespace

size_t OpShape::in_count() const {
  return op == CollOp::kReduceScatter ? count * static_cast<size_t>(size) : count;
}

size_t OpShape::out_count() const {
  if (op == CollOp::kAllGather) return count * static_cast<size_t>(size);
  if (op == CollOp::kReduceScatter) return count;
  return 0;
}

size_t OpShape::result_count() const {
  return op == CollOp::kAllGather ? count * static_cast<size_t>(size) : count;
}

void fill_inputs(const OpShape& s, std::vector<float>& in, std::vector<float>& out) {
  in.resize(s.in_count());
  out.assign(s.out_count(), kSentinel);
  const bool receives = s.op == CollOp::kBroadcast && s.rank != 0;
  for (size_t i = 0; i < in.size(); ++i) in[i] = receives ? kSentinel : input_value(s.rank, i);
}

std::string check_full(const OpShape& s, const std::vector<float>& in, const std::vector<float>& out) {
  const float* r = result_of(s, in.data(), out.data());
  for (size_t i = 0; i < s.result_count(); ++i) {
    if (r[i] != expected(s, i)) return wrong(s, i, r[i], "full check");
  }
  return "";
}

size_t SampledCheck::position(size_t k, int which) const {
  const size_t n = s_.result_count();
  switch (which) {
    case 0: return k % n;                            // walks up from the front
    case 1: return n - 1 - (k % n);                  // and down from the back
    default: return (k * 2654435761u + 12345u) % n;  // and jumps around
  }
}

void SampledCheck::prepare(size_t k, float* in, float* out) {
  for (int w = 0; w < kSamples; ++w) {
    const size_t p = position(k, w);
    switch (s_.op) {
      case CollOp::kAllReduce: in[p] = input_value(s_.rank, p); break;
      case CollOp::kBroadcast: in[p] = s_.rank == 0 ? input_value(0, p) : kSentinel; break;
      case CollOp::kAllGather: out[p] = kSentinel; break;
      case CollOp::kReduceScatter:
        // Every rank restores element p of every block: all of them feed result element p.
        for (int b = 0; b < s_.size; ++b) {
          const size_t g = static_cast<size_t>(b) * s_.count + p;
          in[g] = input_value(s_.rank, g);
        }
        out[p] = kSentinel;
        break;
    }
  }
}

std::string SampledCheck::check(size_t k, const float* in, const float* out) const {
  const float* r = result_of(s_, in, out);
  for (int w = 0; w < kSamples; ++w) {
    const size_t p = position(k, w);
    if (r[p] != expected(s_, p)) return wrong(s_, p, r[p], detail::str("op ", k, " (sampled)").c_str());
  }
  return "";
}

void SampledCheck::corrupt(size_t k, float* in, float* out) const {
  const size_t p = position(k, 0);
  const bool in_place = s_.op == CollOp::kAllReduce || s_.op == CollOp::kBroadcast;
  (in_place ? in : out)[p] = expected(s_, p) + 1;
}

}  // namespace ddp::bench
