#include "comm/reduce_kernels.h"

#include <doctest/doctest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <vector>

#include "common/error.h"

using namespace ddp;
using namespace ddp::comm;

namespace {

constexpr ReduceOp kAllOps[] = {ReduceOp::kSum, ReduceOp::kProduct, ReduceOp::kMin, ReduceOp::kMax,
                                ReduceOp::kAvg, ReduceOp::kBand,    ReduceOp::kBor, ReduceOp::kBxor};

std::vector<int32_t> combined(const std::vector<int32_t>& a, const std::vector<int32_t>& b, ReduceOp op) {
  std::vector<int32_t> c = a;
  combine(c.data(), b.data(), c.size(), DType::kInt32, op);
  return c;
}

}  // namespace

TEST_CASE("combine: every op on integers") {
  std::vector<int32_t> a{6, -3, 12}, b{3, 5, 10};
  CHECK(combined(a, b, ReduceOp::kSum) == std::vector<int32_t>{9, 2, 22});
  CHECK(combined(a, b, ReduceOp::kAvg) == std::vector<int32_t>{9, 2, 22});  // divided later
  CHECK(combined(a, b, ReduceOp::kProduct) == std::vector<int32_t>{18, -15, 120});
  CHECK(combined(a, b, ReduceOp::kMin) == std::vector<int32_t>{3, -3, 10});
  CHECK(combined(a, b, ReduceOp::kMax) == std::vector<int32_t>{6, 5, 12});
  CHECK(combined(a, b, ReduceOp::kBand) == std::vector<int32_t>{6 & 3, -3 & 5, 12 & 10});
  CHECK(combined(a, b, ReduceOp::kBor) == std::vector<int32_t>{6 | 3, -3 | 5, 12 | 10});
  CHECK(combined(a, b, ReduceOp::kBxor) == std::vector<int32_t>{6 ^ 3, -3 ^ 5, 12 ^ 10});
}

TEST_CASE("combine: integer sums and products wrap (two's complement, no UB)") {
  std::vector<int32_t> a{std::numeric_limits<int32_t>::max()}, one{1};
  combine(a.data(), one.data(), 1, DType::kInt32, ReduceOp::kSum);
  CHECK(a[0] == std::numeric_limits<int32_t>::min());
  std::vector<int64_t> l{std::numeric_limits<int64_t>::max()}, l2{2};
  combine(l.data(), l2.data(), 1, DType::kInt64, ReduceOp::kProduct);
  CHECK(l[0] == -2);
  std::vector<int8_t> s{100}, s2{100};
  combine(s.data(), s2.data(), 1, DType::kInt8, ReduceOp::kSum);
  CHECK(s[0] == static_cast<int8_t>(-56));
  std::vector<uint8_t> u{200}, u2{2};
  combine(u.data(), u2.data(), 1, DType::kUInt8, ReduceOp::kProduct);
  CHECK(u[0] == 144);
}

TEST_CASE("combine3: the output may be either input, or a third buffer") {
  std::vector<int32_t> a{6, -3}, b{3, 5}, c(2);
  combine3(c.data(), a.data(), b.data(), 2, DType::kInt32, ReduceOp::kSum);
  CHECK(c == std::vector<int32_t>{9, 2});
  std::vector<int32_t> a2 = a;
  combine3(a2.data(), a2.data(), b.data(), 2, DType::kInt32, ReduceOp::kMax);
  CHECK(a2 == std::vector<int32_t>{6, 5});
  std::vector<int32_t> b2 = b;
  combine3(b2.data(), a.data(), b2.data(), 2, DType::kInt32, ReduceOp::kMin);
  CHECK(b2 == std::vector<int32_t>{3, -3});
}

TEST_CASE("combine3: operand order is kept when the output is the second input (min/max with NaN)") {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  std::vector<float> a{nan}, b{1.0f};
  combine3(b.data(), a.data(), b.data(), 1, DType::kFloat32, ReduceOp::kMin);  // std::min(NaN, 1)
  CHECK(std::isnan(b[0]));
  std::vector<float> a2{1.0f}, b2{nan};
  combine3(b2.data(), a2.data(), b2.data(), 1, DType::kFloat32, ReduceOp::kMax);  // std::max(1, NaN)
  CHECK(b2[0] == 1.0f);
}

TEST_CASE("combine: 16-bit floats reduce in float and round back") {
  std::vector<uint16_t> a{float_to_half(1.5f)}, b{float_to_half(2.25f)}, c(1);
  combine3(c.data(), a.data(), b.data(), 1, DType::kFloat16, ReduceOp::kSum);
  CHECK(half_to_float(c[0]) == 3.75f);
  std::vector<uint16_t> x{float_to_bfloat16(-4.0f)}, y{float_to_bfloat16(3.0f)}, z(1);
  combine3(z.data(), x.data(), y.data(), 1, DType::kBFloat16, ReduceOp::kMin);
  CHECK(bfloat16_to_float(z[0]) == -4.0f);
  std::vector<uint16_t> p{float_to_bfloat16(3.0f)};
  combine(p.data(), y.data(), 1, DType::kBFloat16, ReduceOp::kProduct);
  CHECK(bfloat16_to_float(p[0]) == 9.0f);
}

namespace {

// One element of op over float16/bfloat16, the scalar way: widen, combine in float as the
// kernels' ops do (min/max: std::min/std::max's rule), round back.
uint16_t scalar_16(DType d, ReduceOp op, uint16_t x, uint16_t y) {
  const bool half = d == DType::kFloat16;
  const float a = half ? half_to_float(x) : bfloat16_to_float(x);
  const float b = half ? half_to_float(y) : bfloat16_to_float(y);
  float r = a;
  switch (op) {
    case ReduceOp::kProduct: r = a * b; break;
    case ReduceOp::kMin: r = b < a ? b : a; break;
    case ReduceOp::kMax: r = a < b ? b : a; break;
    default: r = a + b; break;
  }
  return half ? float_to_half(r) : float_to_bfloat16(r);
}

// Which NaN a sum of two NaNs gives (sign, payload) is the hardware's choice of operand, and the
// compiler may swap a commutative sum's operands: any NaN for a NaN, every other value exact.
bool is_nan_16(DType d, uint16_t v) {
  return d == DType::kFloat16 ? (v & 0x7fffu) > 0x7c00u : (v & 0x7fffu) > 0x7f80u;
}

}  // namespace

TEST_CASE("16-bit floats: every value against every other's neighbours, each kernel, the scalar result") {
  // a runs through all 65536 bit patterns (normals, subnormals, infinities, NaNs), b through
  // them at a stride, so every kernel's vector body (F16C where the CPU has it) meets every
  // input class; the result must be the scalar widen-combine-round, bit for bit.
  const size_t n = 65536;
  std::vector<uint16_t> a(n), b(n);
  for (size_t i = 0; i < n; ++i) {
    a[i] = static_cast<uint16_t>(i);
    b[i] = static_cast<uint16_t>(i * 40503u + 12345u);
  }
  for (DType d : {DType::kFloat16, DType::kBFloat16}) {
    for (ReduceOp op : {ReduceOp::kSum, ReduceOp::kProduct, ReduceOp::kMin, ReduceOp::kMax}) {
      CAPTURE(to_string(d));
      CAPTURE(to_string(op));
      std::vector<uint16_t> want(n), rev(n);
      for (size_t i = 0; i < n; ++i) {
        want[i] = scalar_16(d, op, a[i], b[i]);
        rev[i] = scalar_16(d, op, b[i], a[i]);
      }
      auto same = [&](const std::vector<uint16_t>& got, const std::vector<uint16_t>& w) {
        for (size_t i = 0; i < n; ++i) {
          if (got[i] != w[i] && !(is_nan_16(d, got[i]) && is_nan_16(d, w[i]))) {
            FAIL_CHECK("element " << i << ": a " << a[i] << " b " << b[i] << " got " << got[i] << " want "
                                  << w[i]);
            return false;
          }
        }
        return true;
      };
      std::vector<uint16_t> x = a, copy(n);
      combine(x.data(), b.data(), n, d, op);
      CHECK(same(x, want));
      std::vector<uint16_t> out(n);
      combine3(out.data(), a.data(), b.data(), n, d, op);
      CHECK(same(out, want));
      std::vector<uint16_t> in_b = b;
      combine3(in_b.data(), a.data(), in_b.data(), n, d, op);  // output is the second input
      CHECK(same(in_b, want));
      std::vector<uint16_t> c = b;
      combine(c.data(), a.data(), n, d, op);  // operand order kept: b op a
      CHECK(same(c, rev));
      std::vector<uint16_t> y = a;
      combine_copy(y.data(), b.data(), copy.data(), n, d, op);
      CHECK(same(y, want));
      CHECK(same(copy, want));
    }
  }
}

TEST_CASE("combine: bitwise ops on floating types are an InvalidArgument") {
  std::vector<float> a{1.0f}, b{2.0f};
  for (DType d : {DType::kFloat32, DType::kFloat64, DType::kFloat16, DType::kBFloat16}) {
    for (ReduceOp op : {ReduceOp::kBand, ReduceOp::kBor, ReduceOp::kBxor}) {
      CHECK_THROWS_AS(combine(a.data(), b.data(), 1, d, op), InvalidArgument);
    }
  }
}

TEST_CASE("combine: misaligned views give the aligned results, for every dtype and op") {
  // 1000 elements: long enough for the vectorized body and its remainder.
  const size_t n = 1000;
  for (DType d : {DType::kFloat32, DType::kFloat64, DType::kFloat16, DType::kBFloat16, DType::kInt8,
                  DType::kUInt8, DType::kInt32, DType::kInt64}) {
    const size_t es = dtype_size(d);
    std::vector<unsigned char> a(n * es + 1), b(n * es + 1);
    for (size_t i = 0; i < a.size(); ++i) {
      a[i] = static_cast<unsigned char>(i * 7 + 1);
      b[i] = static_cast<unsigned char>(i * 13 + 5);
    }
    if (d == DType::kFloat32 || d == DType::kFloat64) {  // finite values: NaN != NaN
      for (size_t i = 0; i < n; ++i) {
        double va = static_cast<double>(i % 17) - 8.0, vb = static_cast<double>(i % 5) * 0.5;
        if (d == DType::kFloat32) {
          float fa = static_cast<float>(va), fb = static_cast<float>(vb);
          std::memcpy(&a[i * es], &fa, es);
          std::memcpy(&b[i * es], &fb, es);
        } else {
          std::memcpy(&a[i * es], &va, es);
          std::memcpy(&b[i * es], &vb, es);
        }
      }
    }
    for (ReduceOp op : kAllOps) {
      if (is_bitwise(op) && !is_integer(d)) continue;
      std::vector<unsigned char> aligned = a;
      combine(aligned.data(), b.data(), n, d, op);
      std::vector<unsigned char> shifted(n * es + 1), shifted_b(n * es + 1);
      std::memcpy(shifted.data() + 1, a.data(), n * es);
      std::memcpy(shifted_b.data() + 1, b.data(), n * es);
      combine(shifted.data() + 1, shifted_b.data() + 1, n, d, op);
      CAPTURE(to_string(d));
      CAPTURE(to_string(op));
      CHECK(std::memcmp(aligned.data(), shifted.data() + 1, n * es) == 0);
    }
  }
}

TEST_CASE("combine_copy: the result of combine, in dst and in the copy, aligned or not, every dtype and op") {
  const size_t n = 1000;
  for (DType d : {DType::kFloat32, DType::kFloat64, DType::kFloat16, DType::kBFloat16, DType::kInt8,
                  DType::kUInt8, DType::kInt32, DType::kInt64}) {
    const size_t es = dtype_size(d);
    std::vector<unsigned char> a(n * es + 1), b(n * es + 1);
    for (size_t i = 0; i < a.size(); ++i) {  // small integers in every byte: finite in every dtype
      a[i] = static_cast<unsigned char>(i % 7 + 1);
      b[i] = static_cast<unsigned char>(i % 5 + 2);
    }
    for (ReduceOp op : kAllOps) {
      if (is_bitwise(op) && !is_integer(d)) continue;
      CAPTURE(to_string(d));
      CAPTURE(to_string(op));
      std::vector<unsigned char> want = a;
      combine(want.data(), b.data(), n, d, op);
      for (size_t shift : {0u, 1u}) {  // 1: every pointer misaligned
        std::vector<unsigned char> dst(n * es + 1), src(n * es + 1), copy(n * es + 1, 0xAB);
        std::memcpy(dst.data() + shift, a.data(), n * es);
        std::memcpy(src.data() + shift, b.data(), n * es);
        combine_copy(dst.data() + shift, src.data() + shift, copy.data() + shift, n, d, op);
        CHECK(std::memcmp(dst.data() + shift, want.data(), n * es) == 0);
        CHECK(std::memcmp(copy.data() + shift, want.data(), n * es) == 0);
        CHECK(copy[shift == 0 ? n * es : 0] == 0xAB);  // nothing written past the n elements
      }
    }
  }
  CHECK_THROWS_AS(combine_copy(nullptr, nullptr, nullptr, 0, DType::kFloat32, ReduceOp::kBxor),
                  InvalidArgument);
}

TEST_CASE("combine: zero elements touch nothing") {
  combine_copy(nullptr, nullptr, nullptr, 0, DType::kInt32, ReduceOp::kMax);
  combine(nullptr, nullptr, 0, DType::kFloat32, ReduceOp::kSum);
  combine3(nullptr, nullptr, nullptr, 0, DType::kInt64, ReduceOp::kBxor);
  finish_avg(nullptr, 0, DType::kFloat16, 3);
  scale(nullptr, 0, DType::kInt8, 0.5);
}

TEST_CASE("finish_avg: floats divide, integers truncate, wide divisors fit") {
  std::vector<float> f{3.0f, 1.0f};
  finish_avg(f.data(), 2, DType::kFloat32, 2);
  CHECK(f == std::vector<float>{1.5f, 0.5f});
  std::vector<int8_t> i{100, -7};
  finish_avg(i.data(), 2, DType::kInt8, 200);
  CHECK(i == std::vector<int8_t>{0, 0});
  std::vector<int64_t> l{9, -9};
  finish_avg(l.data(), 2, DType::kInt64, 2);
  CHECK(l == std::vector<int64_t>{4, -4});
  std::vector<uint16_t> h{float_to_half(3.0f)};
  finish_avg(h.data(), 1, DType::kFloat16, 4);
  CHECK(half_to_float(h[0]) == 0.75f);
}

TEST_CASE("scale: floats in their own precision, 16-bit through double, integers truncate") {
  std::vector<float> f{1.0f, 2.0f, 3.0f};
  scale(f.data(), 3, DType::kFloat32, 0.5);
  CHECK(f == std::vector<float>{0.5f, 1.0f, 1.5f});
  std::vector<double> d{1.0};
  scale(d.data(), 1, DType::kFloat64, 1.0 / 3.0);
  CHECK(d[0] == 1.0 / 3.0);
  std::vector<uint16_t> h{float_to_half(3.0f)};
  scale(h.data(), 1, DType::kFloat16, 1.0 / 3.0);
  CHECK(h[0] == float_to_half(static_cast<float>(3.0 * (1.0 / 3.0))));
  std::vector<int32_t> ints{3, -3};
  scale(ints.data(), 2, DType::kInt32, 0.5);
  CHECK(ints == std::vector<int32_t>{1, -1});
}

TEST_CASE("scale: integers wrap to the dtype; NaN and out-of-range products are defined") {
  std::vector<int8_t> s{127};
  scale(s.data(), 1, DType::kInt8, 2.0);
  CHECK(s[0] == static_cast<int8_t>(-2));
  std::vector<int64_t> big{std::numeric_limits<int64_t>::max()};
  scale(big.data(), 1, DType::kInt64, 4.0);
  CHECK(big[0] == std::numeric_limits<int64_t>::max());
  std::vector<int32_t> z{5};
  scale(z.data(), 1, DType::kInt32, std::numeric_limits<double>::quiet_NaN());
  CHECK(z[0] == 0);
}
