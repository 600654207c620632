#include "comm/gloo/reduce_kernels.h"

#include <doctest/doctest.h>

#include <cstdint>
#include <vector>

#include "common/error.h"

using namespace ddp;
using namespace ddp::comm;
using namespace ddp::comm::gloo_backend;

TEST_CASE("reduce kernels: every op on integers, aliasing the output") {
  std::vector<int32_t> a{6, -3, 12}, b{3, 5, 10};
  auto run = [&](ReduceOp op) {
    std::vector<int32_t> c = a;
    reduce_fn(DType::kInt32, op)(c.data(), c.data(), b.data(), 3);
    return c;
  };
  CHECK(run(ReduceOp::kSum) == std::vector<int32_t>{9, 2, 22});
  CHECK(run(ReduceOp::kProduct) == std::vector<int32_t>{18, -15, 120});
  CHECK(run(ReduceOp::kMin) == std::vector<int32_t>{3, -3, 10});
  CHECK(run(ReduceOp::kMax) == std::vector<int32_t>{6, 5, 12});
  CHECK(run(ReduceOp::kBand) == std::vector<int32_t>{6 & 3, -3 & 5, 12 & 10});
  CHECK(run(ReduceOp::kBor) == std::vector<int32_t>{6 | 3, -3 | 5, 12 | 10});
  CHECK(run(ReduceOp::kBxor) == std::vector<int32_t>{6 ^ 3, -3 ^ 5, 12 ^ 10});
}

TEST_CASE("reduce kernels: 16-bit floats reduce in float; bitwise on floats is rejected") {
  std::vector<uint16_t> a{float_to_half(1.5f)}, b{float_to_half(2.25f)}, c(1);
  reduce_fn(DType::kFloat16, ReduceOp::kSum)(c.data(), a.data(), b.data(), 1);
  CHECK(half_to_float(c[0]) == doctest::Approx(3.75));
  std::vector<uint16_t> x{float_to_bfloat16(-4.0f)}, y{float_to_bfloat16(3.0f)}, z(1);
  reduce_fn(DType::kBFloat16, ReduceOp::kMin)(z.data(), x.data(), y.data(), 1);
  CHECK(bfloat16_to_float(z[0]) == doctest::Approx(-4.0));
  CHECK_THROWS_AS(reduce_fn(DType::kFloat32, ReduceOp::kBand), InvalidArgument);
}

TEST_CASE("divide_by: floats divide, integers truncate, wide divisors fit") {
  std::vector<float> f{3.0f, 1.0f};
  divide_by(Buffer{f.data(), 2, DType::kFloat32, {}}, 2);
  CHECK(f == std::vector<float>{1.5f, 0.5f});
  std::vector<int8_t> i{100, -7};
  divide_by(Buffer{i.data(), 2, DType::kInt8, {}}, 200);
  CHECK(i == std::vector<int8_t>{0, 0});
  std::vector<int64_t> l{9, -9};
  divide_by(Buffer{l.data(), 2, DType::kInt64, {}}, 2);
  CHECK(l == std::vector<int64_t>{4, -4});
}
