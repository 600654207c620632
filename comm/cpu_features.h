#pragma once
// What the running CPU can do, for the hot loops built beyond baseline x86-64 (Debian builds
// for SSE2): such a loop is compiled twice, once with DDP_TARGET_AVX2 (or
// DDP_TARGET_AVX2_F16C), and the caller picks the build by cpu_features(). Plain functions
// and a branch, not ifunc clones: Clang 14 clones no templates, and under ThreadSanitizer an
// ifunc resolver runs before the TSan runtime is up and crashes every program at load.
namespace ddp::comm {

struct CpuFeatures {
  bool avx2 = false;  // AVX2, and the OS saves the YMM registers
  bool f16c = false;  // F16C (VCVTPH2PS / VCVTPS2PH), likewise
};

// Read once per process (cpuid and xgetbv); all false off x86-64.
const CpuFeatures& cpu_features();

}  // namespace ddp::comm

#if defined(__x86_64__)
#define DDP_TARGET_AVX2 __attribute__((target("avx2")))
#define DDP_TARGET_AVX2_F16C __attribute__((target("avx2,f16c")))
#else
#define DDP_TARGET_AVX2
#define DDP_TARGET_AVX2_F16C
#endif
