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

TEST_CASE("half and bfloat16 conversions") {
  for (float f : {0.0f, 1.0f, -2.5f, 65504.0f, 0.000061035156f, 1e-7f, 3.14159f}) {
    CHECK(half_to_float(float_to_half(f)) == doctest::Approx(f).epsilon(1e-3));
    CHECK(bfloat16_to_float(float_to_bfloat16(f)) == doctest::Approx(f).epsilon(1e-2));
  }
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
