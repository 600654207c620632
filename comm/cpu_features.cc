#include "comm/cpu_features.h"

#if defined(__x86_64__)
#include <cpuid.h>

#include <cstdint>
#endif

namespace ddp::comm {
namespace {

CpuFeatures detect() {
  CpuFeatures f;
#if defined(__x86_64__)
  unsigned a = 0, b = 0, c = 0, d = 0;
  if (__get_cpuid(1, &a, &b, &c, &d) == 0) return f;
  const bool osxsave = (c & bit_OSXSAVE) != 0, avx = (c & bit_AVX) != 0, f16c = (c & bit_F16C) != 0;
  if (!osxsave || !avx) return f;
  // XCR0 bits 1 and 2: the OS saves SSE and AVX (YMM) state on a context switch.
  uint32_t lo = 0, hi = 0;
  __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
  if ((lo & 0x6u) != 0x6u) return f;
  if (__get_cpuid_count(7, 0, &a, &b, &c, &d) != 0) f.avx2 = (b & bit_AVX2) != 0;
  f.f16c = f16c;
#endif
  return f;
}

}  // namespace

const CpuFeatures& cpu_features() {
  static const CpuFeatures features = detect();
  return features;
}

}  // namespace ddp::comm
