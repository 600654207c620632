#pragma once
// The reduction tests' inputs (gloo, mpi, tcp and the conformance suite): rank r's value at
// element i for each reduce op, the exact reduction over ranks 0..world-1, and the oracle's
// self-check, which every test runs for its own dtype, world and count (docs/design.md, "Oracles
// that can fail"). For every world 2..8, every dtype, every count and every offset:
//  - SUM, PRODUCT and AVG differ at every element from every rank's input;
//  - MIN and MAX: the ranks' values at an element are distinct and the rank that holds each
//    changes from each element to the next, so over any two consecutive elements no rank's buffer
//    is the result; each rank holds the MAX at some element of every 18 and the MIN at another;
//  - at every element each op's result differs from what each other op (SUM, PRODUCT, MIN, MAX,
//    AVG) gives on those inputs as the dtype holds it;
//  - values and results are exact in the dtype (bfloat16 included), and so is the AVG.
// The inputs were found by search; the self-check below and reduction_inputs_test.cc prove them.
#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "comm/types.h"

namespace ddp::test {

// The worlds the properties above are proven for; inputs exist for any rank.
inline constexpr int kOracleMaxWorld = 8;
// Every pattern repeats after this many elements (lcm of 9, 3 and 18): an even number (at a
// world of 2 the MAX alternates between the ranks) with no factor 4, so a block moved by a power
// of two from 4 up never lands on equal values.
inline constexpr size_t kOraclePeriod = 18;

inline constexpr comm::ReduceOp kArithmeticOps[] = {comm::ReduceOp::kSum, comm::ReduceOp::kProduct,
                                                    comm::ReduceOp::kMin, comm::ReduceOp::kMax,
                                                    comm::ReduceOp::kAvg};

// SUM, AVG, bitwise: a pattern plus kOffsets[r mod 8], whose sum over ranks 0..n-1 is a multiple
// of n for every n in 1..8 (so the AVG is exact) and whose mean is none of them. PRODUCT: 1s, 2s
// and 3s (some negated in signed types), ranks 8 and up all 1, so 16 virtual ranks stay in int8.
// MIN, MAX: mid +- a magnitude rotating with r + i/2, + where i + r is even.
inline double reduction_input(comm::DType dtype, comm::ReduceOp op, int rank, size_t index) {
  using comm::ReduceOp;
  const bool is_unsigned = dtype == comm::DType::kUInt8;
  const auto r = static_cast<size_t>(rank);
  if (op == ReduceOp::kProduct) {
    if (rank >= 8) return 1;
    if (rank == 0) return 3;
    if (rank == 1) return index % 3 == 0 ? 2 : (!is_unsigned && index % 3 == 1 ? -3 : 3);
    if ((index + r) % 3 == 2) return 2;
    return !is_unsigned && (index + r) % 3 == 1 ? -1 : 1;
  }
  if (op == ReduceOp::kMin || op == ReduceOp::kMax) {
    const double mid = is_unsigned ? 11 : 2;
    const double magnitude = (is_unsigned ? 1 : 9) + static_cast<double>((r + index / 2) % 9);
    return (index + r) % 2 == 0 ? mid + magnitude : mid - magnitude;
  }
  constexpr int kOffsets[] = {0, 2, 10, 0, 8, 10, 12, 14};
  const double pattern = static_cast<double>((7 * index + 3) % 9);
  const double base = is_unsigned ? 4 + pattern : -9 - pattern;
  return base + kOffsets[r % 8];
}

inline double reduction_result(comm::DType dtype, comm::ReduceOp op, int world, size_t index) {
  using comm::ReduceOp;
  double acc = reduction_input(dtype, op, 0, index);
  auto bits = [](double v) { return static_cast<int64_t>(v); };
  for (int r = 1; r < world; ++r) {
    const double x = reduction_input(dtype, op, r, index);
    switch (op) {
      case ReduceOp::kSum:
      case ReduceOp::kAvg: acc += x; break;
      case ReduceOp::kProduct: acc *= x; break;
      case ReduceOp::kMin: acc = std::min(acc, x); break;
      case ReduceOp::kMax: acc = std::max(acc, x); break;
      case ReduceOp::kBand: acc = static_cast<double>(bits(acc) & bits(x)); break;
      case ReduceOp::kBor: acc = static_cast<double>(bits(acc) | bits(x)); break;
      case ReduceOp::kBxor: acc = static_cast<double>(bits(acc) ^ bits(x)); break;
    }
  }
  return op == ReduceOp::kAvg ? acc / world : acc;  // exact: the sum is a multiple of the world
}

// `v` as an element of `dtype` holds it: rounded to the float type, wrapped to the integer one.
inline double held_as(comm::DType dtype, double v) {
  using comm::DType;
  const auto wrapped = [&](int bits, bool is_signed) {
    const auto u = static_cast<uint64_t>(static_cast<int64_t>(v));
    if (bits == 64) return static_cast<double>(static_cast<int64_t>(u));
    const uint64_t m = u & ((uint64_t{1} << bits) - 1);
    const bool negative = is_signed && (m >> (bits - 1)) != 0;
    return negative ? static_cast<double>(static_cast<int64_t>(m) - (int64_t{1} << bits))
                    : static_cast<double>(m);
  };
  switch (dtype) {
    case DType::kFloat32: return static_cast<float>(v);
    case DType::kFloat64: return v;
    case DType::kFloat16: return comm::half_to_float(comm::float_to_half(static_cast<float>(v)));
    case DType::kBFloat16: return comm::bfloat16_to_float(comm::float_to_bfloat16(static_cast<float>(v)));
    case DType::kInt8: return wrapped(8, true);
    case DType::kUInt8: return wrapped(8, false);
    case DType::kInt32: return wrapped(32, true);
    case DType::kInt64: return wrapped(64, true);
  }
  return v;
}

// The largest integer up to which every integer is exact in `dtype` (floats), or its range.
inline double exact_limit(comm::DType dtype) {
  switch (dtype) {
    case comm::DType::kFloat16: return 2048;
    case comm::DType::kBFloat16: return 256;
    case comm::DType::kFloat32: return 16777216;
    default: return 9007199254740992.0;  // doubles; the integer types are checked by wrapping
  }
}

// What `op` gives on `xs` in `dtype` (integer AVG truncates, as the backends do).
inline double reduce_as(comm::DType dtype, comm::ReduceOp op, const std::vector<double>& xs) {
  using comm::ReduceOp;
  double acc = xs[0];
  for (size_t k = 1; k < xs.size(); ++k) {
    if (op == ReduceOp::kProduct)
      acc *= xs[k];
    else if (op == ReduceOp::kMin)
      acc = std::min(acc, xs[k]);
    else if (op == ReduceOp::kMax)
      acc = std::max(acc, xs[k]);
    else
      acc += xs[k];
  }
  if (op == ReduceOp::kAvg) {
    acc /= static_cast<double>(xs.size());
    if (comm::is_integer(dtype)) acc = std::trunc(acc);
  }
  return held_as(dtype, acc);
}

// The exact reduction of `xs` by `op` (AVG: the mean, NaN when it is not exact).
inline double exact_reduction(comm::ReduceOp op, const std::vector<double>& xs) {
  using comm::ReduceOp;
  double acc = xs[0];
  for (size_t k = 1; k < xs.size(); ++k) {
    acc = op == ReduceOp::kProduct ? acc * xs[k]
          : op == ReduceOp::kMin   ? std::min(acc, xs[k])
          : op == ReduceOp::kMax   ? std::max(acc, xs[k])
                                   : acc + xs[k];
  }
  if (op != ReduceOp::kAvg) return acc;
  const auto n = static_cast<double>(xs.size());
  return std::fmod(acc, n) == 0 ? acc / n : std::nan("");
}

// What is wrong with one element whose inputs over the ranks are `xs`, or "". `holder`: for MIN
// and MAX, the rank that holds the result.
inline std::string element_failure(comm::DType dtype, comm::ReduceOp op, const std::vector<double>& xs,
                                   int& holder) {
  using comm::ReduceOp;
  const bool extreme = op == ReduceOp::kMin || op == ReduceOp::kMax;
  const double want = exact_reduction(op, xs);
  if (std::isnan(want)) return "the AVG is not exact";
  if (held_as(dtype, want) != want) return "the result is not exact";
  double magnitude = 0;
  for (size_t r = 0; r < xs.size(); ++r) {
    const std::string rank = "rank " + std::to_string(r);
    magnitude += std::fabs(xs[r]);
    if (held_as(dtype, xs[r]) != xs[r]) return rank + "'s input is not exact";
    if (op == ReduceOp::kProduct && std::fabs(xs[r]) < 1) return "a partial product may not be exact";
    if (xs[r] != want) continue;
    if (!extreme) return rank + "'s input is the result";
    if (holder >= 0) return "two ranks hold the result";
    holder = static_cast<int>(r);
  }
  if ((op == ReduceOp::kSum || op == ReduceOp::kAvg) && magnitude > exact_limit(dtype))
    return "a partial sum may not be exact";
  for (ReduceOp other : kArithmeticOps) {
    if (other != op && reduce_as(dtype, other, xs) == want)
      return std::string("the result is also what ") + comm::to_string(other) + " gives";
  }
  return "";
}

// The self-check of inputs `input(dtype, op, rank, index)` for `dtype`, `op` (one of
// kArithmeticOps) and `world` (2..8) over elements [first, first + count): "" when every property
// in the header comment holds there, else the first that does not. Past a period the patterns
// repeat, so at most a period and one element are looked at. A count of 1 proves less for MIN
// and MAX: its one element is necessarily some rank's value; only from 2 elements can no rank's
// buffer be the result.
template <typename Input>
std::string oracle_failure_of(Input&& input, comm::DType dtype, comm::ReduceOp op, int world, size_t first,
                              size_t count) {
  const bool extreme = op == comm::ReduceOp::kMin || op == comm::ReduceOp::kMax;
  const size_t span = std::min(count, kOraclePeriod + 1);
  const std::string what = std::string(comm::to_string(dtype)) + " world " + std::to_string(world) + " " +
                           comm::to_string(op) + " element ";
  std::vector<int> holder(span, -1);
  for (size_t k = 0; k < span; ++k) {
    std::vector<double> xs;
    for (int r = 0; r < world; ++r) xs.push_back(input(dtype, op, r, first + k));
    std::string failure = element_failure(dtype, op, xs, holder[k]);
    if (failure.empty() && extreme && k > 0 && holder[k] == holder[k - 1])
      failure = "rank " + std::to_string(holder[k]) + " holds the result here and at the element before";
    if (!failure.empty()) return what + std::to_string(first + k) + ": " + failure;
  }
  for (int r = 0; extreme && span >= kOraclePeriod && r < world; ++r) {
    const auto end = holder.begin() + static_cast<std::ptrdiff_t>(kOraclePeriod);
    if (std::find(holder.begin(), end, r) == end)
      return what + std::to_string(first) + " on: rank " + std::to_string(r) +
             " holds the result at none of a period";
  }
  return "";
}

// The self-check of these inputs. Nothing to prove for a world of 1 (its one rank's buffer is
// every result), beyond 8, or for the bitwise ops: "".
inline std::string reduction_oracle_failure(comm::DType dtype, comm::ReduceOp op, int world, size_t first,
                                            size_t count) {
  if (world < 2 || world > kOracleMaxWorld || comm::is_bitwise(op)) return "";
  return oracle_failure_of(reduction_input, dtype, op, world, first, count);
}

}  // namespace ddp::test
