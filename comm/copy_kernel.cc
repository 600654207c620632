#include "comm/copy_kernel.h"

#include <cstring>

namespace ddp::comm {

// 128 bytes an iteration through fixed-size copies the compiler turns into vector moves (and
// never into a call to memcpy); the tail goes through memcpy, which is short there.
// Not under ThreadSanitizer: the clones' ifunc resolver runs at relocation, before the TSan
// runtime is up, and its instrumented entry crashes every program at load.
#if defined(__x86_64__) && !defined(__SANITIZE_THREAD__)
#define DDP_COPY_CLONES __attribute__((target_clones("avx2", "default")))
#else
#define DDP_COPY_CLONES
#endif

DDP_COPY_CLONES void copy_bytes_vector(void* dst, const void* src, size_t n) {
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

}  // namespace ddp::comm
