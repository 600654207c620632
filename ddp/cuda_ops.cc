#include "ddp/cuda_ops.h"

#include <dlfcn.h>

#include <string>

#include "common/error.h"
#include "ddp/device_ops.h"

namespace ddp::cuda {
namespace {

// The few CUDA runtime entry points the engine uses, found at run time: a CUDA runtime already
// in the process (e.g. PyTorch's) first, else the system's libcudart. libddp has no link
// dependency on CUDA, so it loads on machines without it; their signatures are stable across
// CUDA releases (cudaError_t is an int-sized enum; cudaMemcpyDefault is 4).
struct Runtime {
  int (*get_device_count)(int*) = nullptr;
  int (*get_device)(int*) = nullptr;
  int (*set_device)(int) = nullptr;
  int (*malloc)(void**, size_t) = nullptr;
  int (*free)(void*) = nullptr;
  int (*memcpy)(void*, const void*, size_t, int) = nullptr;
  int (*memset)(void*, int, size_t) = nullptr;
  const char* (*error_string)(int) = nullptr;
  std::string missing;  // why there is none, when there is none

  bool loaded() const { return missing.empty(); }
};
constexpr int kMemcpyDefault = 4;

template <typename F>
bool find(void* lib, const char* name, F& fn) {
  fn = reinterpret_cast<F>(::dlsym(lib, name));
  return fn != nullptr;
}

bool bind(void* lib, Runtime& r) {
  return find(lib, "cudaGetDeviceCount", r.get_device_count) && find(lib, "cudaGetDevice", r.get_device) &&
         find(lib, "cudaSetDevice", r.set_device) && find(lib, "cudaMalloc", r.malloc) &&
         find(lib, "cudaFree", r.free) && find(lib, "cudaMemcpy", r.memcpy) &&
         find(lib, "cudaMemset", r.memset) && find(lib, "cudaGetErrorString", r.error_string);
}

Runtime load() {
  Runtime r;
  if (bind(RTLD_DEFAULT, r)) return r;
  for (const char* name : {"libcudart.so", "libcudart.so.13", "libcudart.so.12", "libcudart.so.11.0"}) {
    void* lib = ::dlopen(name, RTLD_NOW | RTLD_LOCAL);
    if (lib == nullptr) continue;
    if (bind(lib, r)) return r;
    ::dlclose(lib);  // not a CUDA runtime we can use
  }
  r = Runtime{};
  r.missing = "no CUDA runtime (libcudart.so) could be loaded";
  return r;
}

const Runtime& runtime() {
  static const Runtime r = load();
  return r;
}

const Runtime& require(const char* op) {
  const Runtime& r = runtime();
  if (!r.loaded()) DDP_THROW(InvalidArgument, op, ": CUDA memory, but ", r.missing);
  return r;
}

void check(int err, const char* what, int device) {
  if (err != 0) DDP_THROW(BackendError, what, " on cuda:", device, ": ", runtime().error_string(err));
}

// Makes `device` current for the calling thread and restores the previous one on exit.
class DeviceGuard {
 public:
  DeviceGuard(const Runtime& r, int device) : r_(r) {
    r_.get_device(&previous_);
    if (device >= 0 && device != previous_) check(r_.set_device(device), "cudaSetDevice", device);
  }
  ~DeviceGuard() noexcept { r_.set_device(previous_); }
  DeviceGuard(const DeviceGuard&) = delete;
  DeviceGuard& operator=(const DeviceGuard&) = delete;

 private:
  const Runtime& r_;
  int previous_ = 0;
};

}  // namespace

bool built() { return runtime().loaded(); }

int device_count() noexcept {
  const Runtime& r = runtime();
  int n = 0;
  if (!r.loaded() || r.get_device_count(&n) != 0) return 0;
  return n;
}

void* allocate(size_t bytes, int device) {
  const Runtime& r = require("allocate");
  DeviceGuard guard(r, device);
  void* p = nullptr;
  check(r.malloc(&p, bytes), "cudaMalloc", device);
  check(r.memset(p, 0, bytes), "cudaMemset", device);
  return p;
}

void release(void* ptr, int device) noexcept {
  const Runtime& r = runtime();
  if (!r.loaded()) return;
  try {
    DeviceGuard guard(r, device);
    r.free(ptr);
  } catch (...) {  // a device that cannot be made current: nothing to free on it
  }
}

void copy(void* dst, int dst_device, const void* src, int src_device, size_t bytes) {
  const Runtime& r = require("copy");
  const int device = dst_device >= 0 ? dst_device : src_device;
  DeviceGuard guard(r, device);
  check(r.memcpy(dst, src, bytes, kMemcpyDefault), "cudaMemcpy", device);
}

void zero(void* ptr, int device, size_t bytes) {
  const Runtime& r = require("zero");
  DeviceGuard guard(r, device);
  check(r.memset(ptr, 0, bytes), "cudaMemset", device);
}

}  // namespace ddp::cuda

namespace ddp {
bool cuda_supported() { return cuda::built(); }
}  // namespace ddp
