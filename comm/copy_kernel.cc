#include "comm/copy_kernel.h"

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <memory>

#include <immintrin.h>

#include "comm/cpu_features.h"
#include "common/error.h"
#include "common/settings.h"

namespace ddp::comm {

namespace {

// 128 bytes an iteration through fixed-size copies the compiler turns into vector moves (and
// never into a call to memcpy); the tail goes through memcpy, which is short there.
[[gnu::always_inline]] inline void copy_loop(void* dst, const void* src, size_t n) {
  auto* d = static_cast<unsigned char*>(dst);
  const auto* s = static_cast<const unsigned char*>(src);
  size_t i = 0;
  for (; i + 128 <= n; i += 128) {
    unsigned char block[128];
    __builtin_memcpy(block, s + i, 128);
    __builtin_memcpy(d + i, block, 128);
  }
  std::memcpy(d + i, s + i, n - i);
}

DDP_TARGET_AVX2 void copy_loop_avx2(void* dst, const void* src, size_t n) { copy_loop(dst, src, n); }

// n a multiple of 64, dst 64-byte aligned: 64 bytes an iteration, loaded unaligned and stored
// past the cache.
void stream_loop_sse2(char* dst, const char* src, size_t n) {
  for (size_t i = 0; i < n; i += 64) {
    for (size_t k = 0; k < 64; k += 16) {
      const __m128i v = _mm_loadu_si128(reinterpret_cast<const __m128i*>(src + i + k));
      _mm_stream_si128(reinterpret_cast<__m128i*>(dst + i + k), v);
    }
  }
}

DDP_TARGET_AVX2 void stream_loop_avx2(char* dst, const char* src, size_t n) {
  for (size_t i = 0; i < n; i += 64) {
    const __m256i a = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(src + i));
    const __m256i b = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(src + i + 32));
    _mm256_stream_si256(reinterpret_cast<__m256i*>(dst + i), a);
    _mm256_stream_si256(reinterpret_cast<__m256i*>(dst + i + 32), b);
  }
}

}  // namespace

void copy_bytes_vector(void* dst, const void* src, size_t n) {
  if (cpu_features().avx2) return copy_loop_avx2(dst, src, n);
  copy_loop(dst, src, n);
}

void copy_bytes_streaming(void* dst, const void* src, size_t n) {
  if (n < 4096) {
    std::memcpy(dst, src, n);
    return;
  }
  auto* d = static_cast<char*>(dst);
  const auto* s = static_cast<const char*>(src);
  const size_t head = (64 - (reinterpret_cast<uintptr_t>(d) & 63)) & 63;  // to a whole line
  std::memcpy(d, s, head);
  const size_t body = (n - head) & ~size_t{63};
  if (cpu_features().avx2) {
    stream_loop_avx2(d + head, s + head, body);
  } else {
    stream_loop_sse2(d + head, s + head, body);
  }
  std::memcpy(d + head + body, s + head + body, n - head - body);
  _mm_sfence();  // ordered before whatever publishes the data (a counter's store)
}

static_assert(settings::choices_are(settings::kCopyKernel, "auto|memcpy|vector"));  // CopyKernelSetting

namespace {

constexpr size_t kProbeBytes = 64 << 10;
constexpr size_t kProbeDistance = 16;  // where malloc puts a large buffer past a 64-byte slot
constexpr int kProbeRounds = 7;
// The loop must win by this much to replace memcpy (noise must not flip a tie).
constexpr double kMargin = 1.2;

using Clock = std::chrono::steady_clock;

template <typename Copy>
double fastest_ns(Copy copy) {
  double best = 1e30;
  for (int r = 0; r < kProbeRounds; ++r) {
    const auto t0 = Clock::now();
    copy();
    best = std::min(best, std::chrono::duration<double, std::nano>(Clock::now() - t0).count());
  }
  return best;
}

}  // namespace

ShortCopy calibrate_short_copy() {
  using Memory = std::unique_ptr<unsigned char, decltype(&std::free)>;
  Memory src(static_cast<unsigned char*>(std::aligned_alloc(4096, kProbeBytes)), &std::free);
  Memory dst(static_cast<unsigned char*>(std::aligned_alloc(4096, kProbeBytes + 4096)), &std::free);
  if (!src || !dst) return ShortCopy::kMemcpy;
  std::memset(src.get(), 1, kProbeBytes);
  std::memset(dst.get(), 0, kProbeBytes + 4096);
  unsigned char* to = dst.get() + kProbeDistance;
  // Through a volatile pointer: the compiler must not see (and inline) memcpy's size.
  void* (*volatile libc_copy)(void*, const void*, size_t) = &std::memcpy;
  const double lib = fastest_ns([&] { libc_copy(to, src.get(), kProbeBytes); });
  const double loop = fastest_ns([&] { copy_bytes_vector(to, src.get(), kProbeBytes); });
  return lib > loop * kMargin ? ShortCopy::kVector : ShortCopy::kMemcpy;
}

ShortCopy short_copy() {
  static const ShortCopy choice = [] {
    switch (settings::choice_as<CopyKernelSetting>(settings::kCopyKernel)) {
      case CopyKernelSetting::kMemcpy: return ShortCopy::kMemcpy;
      case CopyKernelSetting::kVector: return ShortCopy::kVector;
      case CopyKernelSetting::kAuto: break;
    }
    return calibrate_short_copy();
  }();
  return choice;
}

}  // namespace ddp::comm
