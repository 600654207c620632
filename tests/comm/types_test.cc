#include "comm/types.h"

#include <doctest/doctest.h>

#include <cmath>
#include <vector>

#include "common/error.h"

using namespace ddp::comm;

TEST_CASE("dtype sizes and names round-trip") {
  for (auto d : {DType::kFloat32, DType::kFloat64, DType::kFloat16, DType::kBFloat16, DType::kInt8,
                 DType::kUInt8, DType::kInt32, DType::kInt64}) {
    CHECK(parse_dtype(to_string(d)) == d);
    CHECK(dtype_size(d) >= 1);
  }
  CHECK(dtype_size(DType::kBFloat16) == 2);
  CHECK_THROWS_AS(parse_dtype("float128"), ddp::InvalidArgument);
  CHECK(parse_reduce_op("AVG") == ReduceOp::kAvg);
  CHECK(is_bitwise(ReduceOp::kBxor));
  CHECK_FALSE(is_integer(DType::kBFloat16));
}

namespace {

// |got - want| within `rel` of |want|: relative at every magnitude (doctest::Approx's default
// scale of 1 would accept anything within epsilon of zero, so near-zero checks said nothing).
bool within_rel(float got, float want, float rel) { return std::fabs(got - want) <= rel * std::fabs(want); }

}  // namespace

TEST_CASE("half and bfloat16 conversions") {
  // Exactly representable in both: exact round trips (2^-14 is half's smallest normal).
  for (float f : {0.0f, 1.0f, -2.5f, 0.5f, std::ldexp(1.0f, -14), -std::ldexp(1.0f, -14)}) {
    CAPTURE(f);
    CHECK(half_to_float(float_to_half(f)) == f);
    CHECK(bfloat16_to_float(float_to_bfloat16(f)) == f);
  }
  CHECK(half_to_float(float_to_half(65504.0f)) == 65504.0f);  // half's largest finite
  // Normal values: within half a unit in the last place (2^-11 half, 2^-8 bfloat16), relative,
  // small magnitudes included.
  for (float f : {3.14159f, -1234.567f, 1e-3f, 7e-5f}) {
    CAPTURE(f);
    CHECK(within_rel(half_to_float(float_to_half(f)), f, std::ldexp(1.0f, -11)));
  }
  for (float f : {3.14159f, -1234.567f, 1e-3f, 1e-7f, -3e-20f, 1e30f}) {
    CAPTURE(f);
    CHECK(within_rel(bfloat16_to_float(float_to_bfloat16(f)), f, std::ldexp(1.0f, -8)));
  }
  // Half subnormals, exactly: 2^-24 is the smallest; 1e-7 rounds to 2 x 2^-24; 2^-26 rounds
  // to zero (half-way cases go to even: 2^-25 is 0 too), and signs survive.
  CHECK(half_to_float(float_to_half(std::ldexp(1.0f, -24))) == std::ldexp(1.0f, -24));
  CHECK(half_to_float(float_to_half(1e-7f)) == std::ldexp(1.0f, -23));
  CHECK(half_to_float(float_to_half(-3.0f * std::ldexp(1.0f, -24))) == -3.0f * std::ldexp(1.0f, -24));
  CHECK(half_to_float(float_to_half(std::ldexp(1.0f, -26))) == 0.0f);
  CHECK(half_to_float(float_to_half(std::ldexp(1.0f, -25))) == 0.0f);
  CHECK(float_to_half(3.14159f) == 0x4248);      // 3.140625, the nearest half
  CHECK(float_to_bfloat16(3.14159f) == 0x4049);  // 3.140625, the nearest bfloat16
  CHECK(std::isinf(half_to_float(float_to_half(1e6f))));
  CHECK(float_to_half(1.0f) == 0x3c00);
  CHECK(float_to_bfloat16(1.0f) == 0x3f80);
}

TEST_CASE("buffer views and slices") {
  std::vector<int32_t> v(10);
  Buffer b = view(v.data(), v.size());
  CHECK(b.bytes() == 40);
  Buffer s = b.slice(4, 3);
  CHECK(s.data == &v[4]);
  CHECK(s.count == 3);
  CHECK_THROWS_AS(b.slice(8, 3), ddp::InvalidArgument);
}
