#pragma once
// CUDA memory for code that must not include CUDA headers (tests, benchmarks, the DDP engine):
// device and pinned host allocations as RAII handles, copies, and device discovery. Every CUDA
// failure is a BackendError naming the call and the device. Thread-safe.
#include <cstddef>
#include <memory>

#include "comm/types.h"

namespace ddp::comm::cuda {

// Number of visible CUDA devices; 0 when there is no driver or no device (never throws).
int device_count();

// The device a rank uses: LOCAL_RANK (else `rank`) modulo the device count.
int default_device(int rank);

struct DeviceFree {
  int device = 0;
  void operator()(void* p) const noexcept;
};
using DeviceMemory = std::unique_ptr<void, DeviceFree>;
DeviceMemory device_alloc(size_t bytes, int device);

struct HostFree {
  void operator()(void* p) const noexcept;
};
using PinnedMemory = std::unique_ptr<void, HostFree>;
PinnedMemory pinned_alloc(size_t bytes);

// Synchronous copies (they order after work queued on the device's legacy default stream).
void copy_to_device(void* dst, const void* src, size_t bytes, int device);
void copy_to_host(void* dst, const void* src, size_t bytes, int device);

// A view of device memory.
inline Buffer device_view(void* data, size_t count, DType dtype, int device) {
  return Buffer{data, count, dtype, Device{DeviceType::kCuda, device}};
}

}  // namespace ddp::comm::cuda
