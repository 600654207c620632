#include "tests/comm/reduction_inputs.h"

#include <doctest/doctest.h>

using namespace ddp;
using namespace ddp::comm;
using namespace ddp::test;

namespace {

constexpr DType kDTypes[] = {DType::kFloat32, DType::kFloat64, DType::kFloat16, DType::kBFloat16,
                             DType::kInt8,    DType::kUInt8,   DType::kInt32,   DType::kInt64};

// The inputs these tests had before (issue 56): for MIN and MAX (i + 3r) mod 11, so at world 2
// rank 1 held the MAX at elements 0..7; PRODUCT 2 where (i + r) mod 3 == 0, else 1.
double old_input(DType dtype, ReduceOp op, int rank, size_t index) {
  const auto r = static_cast<size_t>(rank);
  if (op == ReduceOp::kMin || op == ReduceOp::kMax) return static_cast<double>((index + 3 * r) % 11) - 5;
  if (op == ReduceOp::kProduct) return (index + r) % 3 == 0 ? 2 : 1;
  return reduction_input(dtype, op, rank, index);
}

// Rank `r`'s inputs for `op` over [first, first + count), as a backend that returns them would.
std::vector<double> rank_buffer(DType dtype, ReduceOp op, int r, size_t first, size_t count) {
  std::vector<double> v;
  for (size_t i = first; i < first + count; ++i)
    v.push_back(held_as(dtype, reduction_input(dtype, op, r, i)));
  return v;
}

// Whether `got` passes a test's element-by-element comparison with the reference.
bool passes(const std::vector<double>& got, DType dtype, ReduceOp op, int world, size_t first) {
  for (size_t k = 0; k < got.size(); ++k) {
    if (got[k] != reduction_result(dtype, op, world, first + k)) return false;
  }
  return true;
}

}  // namespace

TEST_CASE("reduction inputs: every property holds for every dtype, world 2..8, count and offset") {
  for (DType d : kDTypes) {
    for (int n = 2; n <= kOracleMaxWorld; ++n) {
      for (size_t count : {size_t{1}, size_t{2}, size_t{3}, size_t{5}, size_t{7}, size_t{16},
                           kOraclePeriod + 1, size_t{200}}) {
        for (size_t first : {size_t{0}, size_t{1}, size_t{6}, size_t{101}, 3 * count}) {
          for (ReduceOp op : kArithmeticOps) {
            const std::string failure = reduction_oracle_failure(d, op, n, first, count);
            CHECK_MESSAGE(failure.empty(), failure);
          }
        }
      }
    }
  }
}

TEST_CASE("reduction inputs: the self-check fails the old ones (MAX was rank 1's buffer at world 2)") {
  const std::string max_failure = oracle_failure_of(
      [](DType d, ReduceOp op, int r, size_t i) {
        return op == ReduceOp::kMax ? old_input(d, op, r, i) : reduction_input(d, op, r, i);
      },
      DType::kInt32, ReduceOp::kMax, 2, 0, 5);
  CHECK(max_failure == "int32 world 2 max element 1: rank 1 holds the result here and at the element before");
  const std::string product_failure = oracle_failure_of(
      [](DType d, ReduceOp op, int r, size_t i) {
        return op == ReduceOp::kProduct ? old_input(d, op, r, i) : reduction_input(d, op, r, i);
      },
      DType::kFloat32, ReduceOp::kProduct, 3, 0, 7);
  CHECK(product_failure == "float32 world 3 product element 0: rank 0's input is the result");
}

// The negative control: a backend that returns one rank's buffer (its own, or one rank's to all),
// or applies another op, fails the comparison at every world, dtype and op from 2 elements (from
// 1 for SUM, PRODUCT and AVG), wherever the buffer starts.
TEST_CASE("reduction inputs: one rank's buffer, or another op's result, never passes") {
  for (DType d : kDTypes) {
    for (int n = 2; n <= kOracleMaxWorld; ++n) {
      for (ReduceOp op : kArithmeticOps) {
        const bool extreme = op == ReduceOp::kMin || op == ReduceOp::kMax;
        for (size_t count = extreme ? 2 : 1; count <= 9; ++count) {
          for (size_t first : {size_t{0}, count, 5 * count}) {
            for (int r = 0; r < n; ++r) {
              CAPTURE(to_string(d));
              CAPTURE(to_string(op));
              CAPTURE(n);
              CAPTURE(count);
              CAPTURE(first);
              CHECK_MESSAGE(!passes(rank_buffer(d, op, r, first, count), d, op, n, first), "rank ", r,
                            "'s buffer passes");
            }
            for (ReduceOp other : kArithmeticOps) {
              if (other == op) continue;
              std::vector<double> got;
              for (size_t i = first; i < first + count; ++i) {
                std::vector<double> xs;
                for (int r = 0; r < n; ++r) xs.push_back(reduction_input(d, op, r, i));
                got.push_back(reduce_as(d, other, xs));
              }
              CHECK_MESSAGE(!passes(got, d, op, n, first), to_string(other), " passes for ", to_string(op));
            }
          }
        }
      }
    }
  }
}

// Blocks of a pipelined op are often a power of two apart: no such shift from 4 up maps the
// results onto themselves, so a block written to the wrong place reads other values.
TEST_CASE("reduction inputs: results shifted by a power of two from 4 up differ within a period") {
  for (DType d : kDTypes) {
    for (int n = 2; n <= kOracleMaxWorld; ++n) {
      for (ReduceOp op : kArithmeticOps) {
        for (size_t shift = 4; shift <= (size_t{1} << 24); shift *= 2) {
          bool differs = false;
          for (size_t i = 0; i < kOraclePeriod && !differs; ++i)
            differs = reduction_result(d, op, n, i) != reduction_result(d, op, n, i + shift);
          CHECK_MESSAGE(differs, std::string(to_string(d)), " ", std::string(to_string(op)), " world ", n,
                        ": shift ", shift);
        }
      }
    }
  }
}
