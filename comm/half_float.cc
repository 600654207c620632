#include "comm/half_float.h"

#if defined(__x86_64__)
#include <immintrin.h>
#endif

#include "comm/cpu_features.h"
#include "common/settings.h"

namespace ddp::comm::half_float {
namespace {

#if defined(__x86_64__)
// VCVTPH2PS / VCVTPS2PH, 8 values an instruction (rounding to nearest even, as above).
DDP_TARGET_AVX2_F16C void widen_f16c(float* out, const uint16_t* in, size_t n) {
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m128i h = _mm_loadu_si128(reinterpret_cast<const __m128i*>(in + i));
    _mm256_storeu_ps(out + i, _mm256_cvtph_ps(h));
  }
  for (; i < n; ++i) out[i] = f16_to_f32(in[i]);
}

DDP_TARGET_AVX2_F16C void narrow_f16c(uint16_t* out, const float* in, size_t n) {
  // VCVTPS2PH keeps a NaN's top payload bits; f32_to_f16 gives the plain quiet NaN.
  const __m128i magnitude = _mm_set1_epi16(0x7fff), inf = _mm_set1_epi16(0x7c00);
  const __m128i sign = _mm_set1_epi16(static_cast<int16_t>(0x8000)), quiet = _mm_set1_epi16(0x7e00);
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    __m128i h = _mm256_cvtps_ph(_mm256_loadu_ps(in + i), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    const __m128i nan = _mm_cmpgt_epi16(_mm_and_si128(h, magnitude), inf);
    const __m128i plain = _mm_or_si128(_mm_and_si128(h, sign), quiet);
    h = _mm_blendv_epi8(h, plain, nan);
    _mm_storeu_si128(reinterpret_cast<__m128i*>(out + i), h);
  }
  for (; i < n; ++i) out[i] = f32_to_f16(in[i]);
}

#endif

bool detect_f16c() {
  return settings::bool_value(settings::kF16c) && cpu_features().avx2 && cpu_features().f16c;
}

}  // namespace

bool f16c_in_use() {
  static const bool use = detect_f16c();
  return use;
}

void f16_to_f32_n(float* out, const uint16_t* in, size_t n) {
#if defined(__x86_64__)
  if (f16c_in_use()) return widen_f16c(out, in, n);
#endif
  for (size_t i = 0; i < n; ++i) out[i] = f16_to_f32(in[i]);
}

void f32_to_f16_n(uint16_t* out, const float* in, size_t n) {
#if defined(__x86_64__)
  if (f16c_in_use()) return narrow_f16c(out, in, n);
#endif
  for (size_t i = 0; i < n; ++i) out[i] = f32_to_f16(in[i]);
}

void bf16_to_f32_n(float* out, const uint16_t* in, size_t n) {
  for (size_t i = 0; i < n; ++i) out[i] = bf16_to_f32(in[i]);
}

void f32_to_bf16_n(uint16_t* out, const float* in, size_t n) {
  for (size_t i = 0; i < n; ++i) out[i] = f32_to_bf16(in[i]);
}

}  // namespace ddp::comm::half_float
