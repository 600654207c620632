#include "ddp/cuda_ops.h"

#include "common/error.h"
#include "ddp/device_ops.h"

#if defined(DDP_WITH_CUDA)
#include <cuda_runtime_api.h>
#endif

namespace ddp::cuda {

#if defined(DDP_WITH_CUDA)
namespace {
void check(cudaError_t err, const char* what, int device) {
  if (err != cudaSuccess) DDP_THROW(BackendError, what, " on cuda:", device, ": ", cudaGetErrorString(err));
}
// Makes `device` current for the calling thread and restores the previous one on exit.
class DeviceGuard {
 public:
  explicit DeviceGuard(int device) {
    cudaGetDevice(&previous_);
    if (device >= 0 && device != previous_) check(cudaSetDevice(device), "cudaSetDevice", device);
  }
  ~DeviceGuard() noexcept { cudaSetDevice(previous_); }
  DeviceGuard(const DeviceGuard&) = delete;
  DeviceGuard& operator=(const DeviceGuard&) = delete;

 private:
  int previous_ = 0;
};
}  // namespace

bool built() { return true; }

int device_count() noexcept {
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess) return 0;
  return n;
}

void* allocate(size_t bytes, int device) {
  DeviceGuard guard(device);
  void* p = nullptr;
  check(cudaMalloc(&p, bytes), "cudaMalloc", device);
  check(cudaMemset(p, 0, bytes), "cudaMemset", device);
  return p;
}

void release(void* ptr, int device) noexcept {
  DeviceGuard guard(device);
  cudaFree(ptr);
}

void copy(void* dst, int dst_device, const void* src, int src_device, size_t bytes) {
  DeviceGuard guard(dst_device >= 0 ? dst_device : src_device);
  check(cudaMemcpy(dst, src, bytes, cudaMemcpyDefault), "cudaMemcpy", dst_device >= 0 ? dst_device : src_device);
}

void zero(void* ptr, int device, size_t bytes) {
  DeviceGuard guard(device);
  check(cudaMemset(ptr, 0, bytes), "cudaMemset", device);
}
#else
namespace {
[[noreturn]] void unsupported(const char* op) {
  DDP_THROW(InvalidArgument, op, ": CUDA memory, but libddp was built without CUDA (no nccl backend)");
}
}  // namespace

bool built() { return false; }
int device_count() noexcept { return 0; }
void* allocate(size_t, int) { unsupported("allocate"); }
void release(void*, int) noexcept {}
void copy(void*, int, const void*, int, size_t) { unsupported("copy"); }
void zero(void*, int, size_t) { unsupported("zero"); }
#endif

}  // namespace ddp::cuda

namespace ddp {
bool cuda_supported() { return cuda::built(); }
}  // namespace ddp
