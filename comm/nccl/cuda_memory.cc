#include "comm/nccl/cuda_memory.h"

#include <cuda_runtime.h>

#include "common/error.h"
#include "common/settings.h"

namespace ddp::comm::cuda {
namespace {

void check(cudaError_t rc, const char* call, int device) {
  if (rc != cudaSuccess) {
    cudaGetLastError();  // clear the sticky-free error state for the next call
    DDP_THROW(BackendError, call, " on cuda:", device, ": ", cudaGetErrorString(rc));
  }
}

}  // namespace

int device_count() {
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess) {
    cudaGetLastError();
    return 0;
  }
  return n;
}

int default_device(int rank) {
  const int n = device_count();
  if (n == 0) DDP_THROW(BackendError, "no CUDA device is visible (cudaGetDeviceCount)");
  const int64_t local = settings::int_or(settings::kLocalRank, rank);
  return static_cast<int>(local % n);
}

void DeviceFree::operator()(void* p) const noexcept {
  if (p == nullptr) return;
  cudaSetDevice(device);
  cudaFree(p);
}

DeviceMemory device_alloc(size_t bytes, int device) {
  check(cudaSetDevice(device), "cudaSetDevice", device);
  void* p = nullptr;
  check(cudaMalloc(&p, bytes == 0 ? 1 : bytes), "cudaMalloc", device);
  return DeviceMemory(p, DeviceFree{device});
}

void HostFree::operator()(void* p) const noexcept {
  if (p != nullptr) cudaFreeHost(p);
}

PinnedMemory pinned_alloc(size_t bytes) {
  void* p = nullptr;
  check(cudaMallocHost(&p, bytes == 0 ? 1 : bytes), "cudaMallocHost", -1);
  return PinnedMemory(p);
}

void copy_to_device(void* dst, const void* src, size_t bytes, int device) {
  if (bytes == 0) return;
  check(cudaSetDevice(device), "cudaSetDevice", device);
  check(cudaMemcpy(dst, src, bytes, cudaMemcpyHostToDevice), "cudaMemcpy(host to device)", device);
}

void copy_to_host(void* dst, const void* src, size_t bytes, int device) {
  if (bytes == 0) return;
  check(cudaSetDevice(device), "cudaSetDevice", device);
  check(cudaMemcpy(dst, src, bytes, cudaMemcpyDeviceToHost), "cudaMemcpy(device to host)", device);
}

}  // namespace ddp::comm::cuda
