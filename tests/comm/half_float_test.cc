#include "comm/half_float.h"

#include <doctest/doctest.h>

#include <cmath>
#include <cstring>
#include <vector>

using namespace ddp::comm::half_float;

namespace {

// The reference: the conversions written the obvious way, with branches (the project's
// implementation before the branch-free one; checked equal on all 2^32 floats when it was
// replaced, 2026-11-26). The tests compare with it bit for bit.
float ref_f16_to_f32(uint16_t h) {
  uint32_t sign = (h & 0x8000u) << 16, exp = (h >> 10) & 0x1fu, mant = h & 0x3ffu, bits;
  if (exp == 0 && mant == 0) {
    bits = sign;
  } else if (exp == 0) {  // subnormal: normalize
    exp = 127 - 15 + 1;
    while ((mant & 0x400u) == 0) {
      mant <<= 1;
      --exp;
    }
    bits = sign | (exp << 23) | ((mant & 0x3ffu) << 13);
  } else if (exp == 0x1f) {
    bits = sign | 0x7f800000u | (mant << 13);
  } else {
    bits = sign | ((exp + 127 - 15) << 23) | (mant << 13);
  }
  return float_of(bits);
}

uint16_t ref_f32_to_f16(float f) {
  const uint32_t x = bits_of(f), sign = (x >> 16) & 0x8000u, abs = x & 0x7fffffffu;
  if (abs >= 0x7f800000u) return static_cast<uint16_t>(sign | 0x7c00u | (abs > 0x7f800000u ? 0x200u : 0));
  if (abs >= 0x477ff000u) return static_cast<uint16_t>(sign | 0x7c00u);  // rounds past 65504
  if (abs < 0x38800000u) {                                               // half subnormal or zero
    if (abs < 0x33000000u) return static_cast<uint16_t>(sign);
    const uint32_t exp = abs >> 23, mant = (abs & 0x7fffffu) | 0x800000u, shift = 126 - exp;
    uint32_t half_mant = mant >> shift;
    const uint32_t rem = mant & ((1u << shift) - 1), halfway = 1u << (shift - 1);
    if (rem > halfway || (rem == halfway && (half_mant & 1u))) ++half_mant;
    return static_cast<uint16_t>(sign | half_mant);
  }
  return static_cast<uint16_t>(sign | ((abs + 0xfffu + ((abs >> 13) & 1u) - 0x38000000u) >> 13));
}

uint16_t ref_f32_to_bf16(float f) {
  const uint32_t x = bits_of(f);
  if ((x & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((x >> 16) | 0x40u);
  return static_cast<uint16_t>((x + 0x7fffu + ((x >> 16) & 1u)) >> 16);
}

// Floats that probe every rounding edge: each sign and exponent, with mantissas at and around
// the float16 (13 dropped bits) and bfloat16 (16 dropped bits) halfway points, and a stride
// through all 2^32 bit patterns.
std::vector<float> probe_floats() {
  std::vector<float> out;
  const uint32_t mants[] = {0,        1,        0xfff,    0x1000,   0x1001,   0x1fff,  0x2000,
                            0x3000,   0x7fff,   0x8000,   0x8001,   0xffff,   0x18000, 0x7ff000,
                            0x7fefff, 0x7fffff, 0x400000, 0x401000, 0x3ff000, 0x7fe000};
  for (uint32_t sign : {0u, 0x80000000u}) {
    for (uint32_t exp = 0; exp < 256; ++exp) {
      for (uint32_t m : mants) out.push_back(float_of(sign | (exp << 23) | m));
    }
  }
  for (uint64_t u = 0; u < (uint64_t{1} << 32); u += 4099) out.push_back(float_of(static_cast<uint32_t>(u)));
  return out;
}

}  // namespace

TEST_CASE("float16 to float: every one of the 65536 values, bit for bit") {
  for (uint32_t h = 0; h < 65536; ++h) {
    CAPTURE(h);
    REQUIRE(bits_of(f16_to_f32(static_cast<uint16_t>(h))) ==
            bits_of(ref_f16_to_f32(static_cast<uint16_t>(h))));
  }
}

TEST_CASE("float to float16 and bfloat16: rounding edges, subnormals, overflow and NaN, bit for bit") {
  for (float f : probe_floats()) {
    CAPTURE(bits_of(f));
    REQUIRE(f32_to_f16(f) == ref_f32_to_f16(f));
    REQUIRE(f32_to_bf16(f) == ref_f32_to_bf16(f));
  }
  // The cases named: ties to even, the largest finite, overflow, NaN stays NaN and quiet.
  CHECK(f32_to_f16(65504.0f) == 0x7bff);
  CHECK(f32_to_f16(65519.99f) == 0x7bff);
  CHECK(f32_to_f16(65520.0f) == 0x7c00);                // the tie past 65504 rounds to even: infinity
  CHECK(f32_to_f16(std::ldexp(1.0f, -25)) == 0);        // a tie between 0 and 2^-24: even, 0
  CHECK(f32_to_f16(-std::ldexp(3.0f, -25)) == 0x8002);  // 1.5 x 2^-24: the tie goes to 2
  CHECK(f32_to_f16(std::nanf("")) == 0x7e00);
  CHECK(f32_to_bf16(float_of(0x7f800001u)) == 0x7fc0);  // a signaling NaN comes back quiet
  CHECK(bits_of(bf16_to_f32(0x3f80)) == bits_of(1.0f));
}

TEST_CASE("bulk conversions: the scalar results, every length, every float16") {
  MESSAGE("F16C in use: " << (f16c_in_use() ? "yes" : "no"));
  std::vector<uint16_t> halves(65536);
  for (uint32_t h = 0; h < 65536; ++h) halves[h] = static_cast<uint16_t>(h);
  std::vector<float> wide(halves.size());
  f16_to_f32_n(wide.data(), halves.data(), halves.size());
  for (uint32_t h = 0; h < 65536; ++h) {
    CAPTURE(h);
    const float want = f16_to_f32(static_cast<uint16_t>(h));
    if (std::isnan(want)) {  // a signaling NaN may come back quiet; sign and NaN-ness stay
      REQUIRE(std::isnan(wide[h]));
      REQUIRE(std::signbit(wide[h]) == std::signbit(want));
    } else {
      REQUIRE(bits_of(wide[h]) == bits_of(want));
    }
  }
  const std::vector<float> floats = probe_floats();
  std::vector<uint16_t> narrow(floats.size());
  f32_to_f16_n(narrow.data(), floats.data(), floats.size());
  for (size_t i = 0; i < floats.size(); ++i) {
    CAPTURE(bits_of(floats[i]));
    REQUIRE(narrow[i] == f32_to_f16(floats[i]));
  }
  // Lengths around the 8-wide body, at an odd offset: the tail converts, nothing past n moves.
  for (size_t n = 0; n <= 17; ++n) {
    CAPTURE(n);
    std::vector<uint16_t> out(n + 2, 0xabcd);
    std::vector<float> back(n + 2, -1.0f);
    f32_to_f16_n(out.data() + 1, floats.data() + 3, n);
    f16_to_f32_n(back.data() + 1, out.data() + 1, n);
    for (size_t i = 0; i < n; ++i) CHECK(out[i + 1] == f32_to_f16(floats[i + 3]));
    CHECK(out[0] == 0xabcd);
    CHECK(out[n + 1] == 0xabcd);
    CHECK(back[n + 1] == -1.0f);
  }
}
