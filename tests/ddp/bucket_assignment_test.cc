#include "ddp/bucket_assignment.h"

#include <doctest/doctest.h>

#include "common/error.h"

using namespace ddp;
using comm::DType;

namespace {
ParamSize f32(size_t n) { return {n, {DType::kFloat32, {}}}; }
ParamSize f64(size_t n) { return {n, {DType::kFloat64, {}}}; }
}  // namespace

TEST_CASE("reverse registration order, small first bucket, then the cap") {
  // 4 params of 100 floats (400 bytes): first cap 400 closes after one, cap 800 after two.
  std::vector<ParamSize> p{f32(100), f32(100), f32(100), f32(100)};
  auto a = assign_buckets(p, reverse_order(4), 400, 800);
  REQUIRE(a.size() == 3);
  CHECK(a[0] == std::vector<size_t>{3});
  CHECK(a[1] == std::vector<size_t>{2, 1});
  CHECK(a[2] == std::vector<size_t>{0});
}

TEST_CASE("a cap larger than the model gives one bucket") {
  std::vector<ParamSize> p{f32(10), f32(20), f32(30)};
  auto a = assign_buckets(p, reverse_order(3), 1 << 20, 25 << 20);
  REQUIRE(a.size() == 1);
  CHECK(a[0] == std::vector<size_t>{2, 1, 0});
}

TEST_CASE("dtypes never share a bucket; buckets sorted by their first position") {
  std::vector<ParamSize> p{f32(10), f64(10), f32(10), f64(10)};
  auto a = assign_buckets(p, reverse_order(4), 1 << 20, 1 << 20);
  REQUIRE(a.size() == 2);
  CHECK(a[0] == std::vector<size_t>{3, 1});  // float64, first seen at position 0
  CHECK(a[1] == std::vector<size_t>{2, 0});
}

TEST_CASE("devices never share a bucket") {
  ParamSize gpu{10, {DType::kFloat32, {comm::DeviceType::kCuda, 0}}};
  std::vector<ParamSize> p{f32(10), gpu, f32(10)};
  auto a = assign_buckets(p, {0, 1, 2}, 1 << 20, 1 << 20);
  REQUIRE(a.size() == 2);
  CHECK(a[0] == std::vector<size_t>{0, 2});
  CHECK(a[1] == std::vector<size_t>{1});
}

TEST_CASE("a custom order (the rebuilt one) is followed") {
  std::vector<ParamSize> p{f32(100), f32(100), f32(100), f32(100)};
  auto a = assign_buckets(p, {1, 3, 0, 2}, 400, 800);
  REQUIRE(a.size() == 3);
  CHECK(a[0] == std::vector<size_t>{1});
  CHECK(a[1] == std::vector<size_t>{3, 0});
  CHECK(a[2] == std::vector<size_t>{2});
}

TEST_CASE("bad orders are rejected") {
  std::vector<ParamSize> p{f32(1), f32(1)};
  CHECK_THROWS_AS(assign_buckets(p, {0}, 4, 4), InvalidArgument);
  CHECK_THROWS_AS(assign_buckets(p, {0, 0}, 4, 4), InvalidArgument);
  CHECK_THROWS_AS(assign_buckets(p, {0, 5}, 4, 4), InvalidArgument);
}
