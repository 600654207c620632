#pragma once
// float16 and bfloat16 to and from float, inline and branch-free: the one definition of these
// conversions (comm/types.h's functions call them), written so that the reduce kernels' loops
// over 16-bit floats vectorize (shifts, adds and selects, no calls, no data-dependent loops).
//
// Rounding is to nearest, ties to even; a float beyond the 16-bit range becomes infinity; NaN
// stays NaN (quiet, sign kept; float16 drops the payload, bfloat16 keeps its top bits); float16
// subnormals both ways. The float16 forms follow F. Giesen's public-domain conversions
// ("half_to_float_fast5", "float_to_half_fast3_rtne"): the FPU rounds the subnormal cases.
#include <cstddef>
#include <cstdint>
#include <cstring>

namespace ddp::comm::half_float {

inline uint32_t bits_of(float f) {
  uint32_t u;
  std::memcpy(&u, &f, sizeof u);
  return u;
}

inline float float_of(uint32_t u) {
  float f;
  std::memcpy(&f, &u, sizeof f);
  return f;
}

inline float f16_to_f32(uint16_t h) {
  const uint32_t shifted = (uint32_t{h} & 0x7fffu) << 13;  // exponent and mantissa, float's place
  const uint32_t exp = shifted & 0x0f800000u;
  uint32_t o = shifted + (112u << 23);            // rebias 15 -> 127
  o = exp == 0x0f800000u ? o + (112u << 23) : o;  // infinity and NaN: exponent 255
  // Zero and subnormals: 2^-14 (1 + m / 1024) - 2^-14 is m 2^-24, exactly.
  const uint32_t sub = bits_of(float_of(o + (1u << 23)) - float_of(113u << 23));
  o = exp == 0 ? sub : o;
  return float_of(o | ((uint32_t{h} & 0x8000u) << 16));
}

inline uint16_t f32_to_f16(float value) {
  const uint32_t all = bits_of(value);
  const uint32_t sign = all & 0x80000000u;
  const uint32_t f = all ^ sign;
  const uint32_t inf_nan = f > 0x7f800000u ? 0x7e00u : 0x7c00u;
  // Results below half's smallest normal: adding 0.5 lets the FPU round the mantissa.
  const float magic = float_of(126u << 23);
  const uint32_t sub = bits_of(float_of(f) + magic) - (126u << 23);
  // Normal results: rebias 127 -> 15, round to nearest even by hand (a carry may reach
  // infinity, as it should).
  const uint32_t odd = (f >> 13) & 1u;
  const uint32_t normal = (f - (112u << 23) + 0xfffu + odd) >> 13;
  const uint32_t o = f >= (143u << 23) ? inf_nan : (f < (113u << 23) ? sub : normal);
  return static_cast<uint16_t>(o | (sign >> 16));
}

inline float bf16_to_f32(uint16_t b) { return float_of(uint32_t{b} << 16); }

inline uint16_t f32_to_bf16(float value) {
  const uint32_t x = bits_of(value);
  const uint32_t rounded = (x + 0x7fffu + ((x >> 16) & 1u)) >> 16;
  const uint32_t nan = (x >> 16) | 0x40u;  // quiet
  return static_cast<uint16_t>((x & 0x7fffffffu) > 0x7f800000u ? nan : rounded);
}

// n values to float and back, in bulk: float16 through F16C where the CPU has it (with AVX2),
// else the inline forms above, vectorized (as bfloat16 always is). The same results either
// way, but for signaling NaNs, which f16_to_f32_n may return quiet.
void f16_to_f32_n(float* out, const uint16_t* in, size_t n);
void f32_to_f16_n(uint16_t* out, const float* in, size_t n);
void bf16_to_f32_n(float* out, const uint16_t* in, size_t n);
void f32_to_bf16_n(uint16_t* out, const float* in, size_t n);
// Whether the float16 bulk conversions use F16C in this process (DDP_F16C=0 turns it off).
bool f16c_in_use();

}  // namespace ddp::comm::half_float
