#pragma once
// copy_bytes: the byte copy of the host backends' hot paths (staging into and out of shared
// memory). Same contract as memcpy (no overlap, any alignment), safe from any thread.
//
// Why not memcpy alone: glibc (2.36, Debian 12) copies 2 KiB .. L2-size with `rep movsb`, and
// on AMD Zen 3/4 that instruction runs 20-70x slower when the destination lies 1..63 bytes
// after the source modulo 4 KiB (glibc BZ 30994; measured on an EPYC Zen 3 VM: 128 KiB at
// 1.3 GB/s instead of 35). A user buffer from malloc (16-byte aligned) copied out of a 64-byte
// aligned slot is exactly that case. Those copies take a vector loop here, on a CPU where it is
// faster: other CPUs (an EPYC Zen 4 with FSRM: memcpy 45 GB/s at that distance, the loop 29)
// keep memcpy. Which one is measured once per process, on the first such copy (a few 64 KiB
// copies each way, under 0.1 ms); DDP_COPY_KERNEL=memcpy|vector decides instead.
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
// DDP_COPY_KERNEL's value: auto, memcpy or vector; InvalidArgument naming it otherwise.
enum class CopyKernelSetting { kAuto, kMemcpy, kVector };
CopyKernelSetting parse_copy_kernel(const std::string& value);
// Times memcpy against the vector loop at a short distance (the faster wins; memcpy unless the
// loop is clearly faster).
ShortCopy calibrate_short_copy();
// The copy for short distances in this process: DDP_COPY_KERNEL, or calibrated on first use.
ShortCopy short_copy();

// Streaming (non-temporal) stores: the copy goes to memory, not into this core's cache, then
// an sfence. A peer on a far core (another socket, or a VM's vCPU on another die) reads it from
// memory instead of snooping this core's cache for every line, which there was 3-4x slower
// (shm_store_choice.h decides when). Copies under 4 KiB are memcpy. Same contract as memcpy.
void copy_bytes_streaming(void* dst, const void* src, size_t n);

inline void copy_bytes(void* dst, const void* src, size_t n) {
  if (n >= 1024 && short_copy_distance(dst, src) && short_copy() == ShortCopy::kVector) {
    copy_bytes_vector(dst, src, n);
  } else {
    __builtin_memcpy(dst, src, n);
  }
}

}  // namespace ddp::comm
