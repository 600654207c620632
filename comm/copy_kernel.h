#pragma once
// copy_bytes: the byte copy of the host backends' hot paths (staging into and out of shared
// memory). Same contract as memcpy (no overlap, any alignment), safe from any thread.
//
// Why not memcpy alone: glibc copies mid-sized buffers with `rep movsb`, which some CPUs run many
// times slower when the destination lies 1..63 bytes after the source modulo 4 KiB (glibc BZ
// 30994); a user buffer from malloc copied out of a 64-byte aligned slot is exactly that case.
// Such copies take a vector loop where this CPU runs it faster, memcpy elsewhere: timed once per
// process, on the first such copy (a few 64 KiB copies each way); DDP_COPY_KERNEL=memcpy|vector
// decides instead.
#include <cstddef>
#include <cstdint>
#include <string>

namespace ddp::comm {

// True when memcpy(dst, src, n) is the slow case above (short forward distance mod 4 KiB).
inline bool short_copy_distance(const void* dst, const void* src) {
  const auto d = (reinterpret_cast<uintptr_t>(dst) - reinterpret_cast<uintptr_t>(src)) & 4095;
  return d != 0 && d < 64;
}

// The vector loop (AVX2 where the CPU has it, SSE2 otherwise): never `rep movsb`.
void copy_bytes_vector(void* dst, const void* src, size_t n);

enum class ShortCopy { kMemcpy, kVector };
// DDP_COPY_KERNEL's choices, in the table's order (settings::choice_as).
enum class CopyKernelSetting { kAuto, kMemcpy, kVector };
// Times memcpy against the vector loop at a short distance (the faster wins; memcpy unless the
// loop is clearly faster).
ShortCopy calibrate_short_copy();
// The copy for short distances in this process: DDP_COPY_KERNEL, or calibrated on first use.
ShortCopy short_copy();

// Streaming (non-temporal) stores: the copy goes to memory, not into this core's cache, then
// an sfence, so a peer on a far core (another socket, or a VM's vCPU on another die) reads it
// from memory instead of snooping this core's cache line by line (shm_store_choice.h decides
// when). Copies under 4 KiB are memcpy. Same contract as memcpy.
void copy_bytes_streaming(void* dst, const void* src, size_t n);

inline void copy_bytes(void* dst, const void* src, size_t n) {
  if (n >= 1024 && short_copy_distance(dst, src) && short_copy() == ShortCopy::kVector) {
    copy_bytes_vector(dst, src, n);
  } else {
    __builtin_memcpy(dst, src, n);
  }
}

}  // namespace ddp::comm
