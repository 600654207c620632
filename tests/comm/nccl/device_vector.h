#pragma once
// Test helpers for device buffers: DeviceVector<T>, an array on one GPU filled from host values
// and read back whole.
#include <memory>
#include <vector>

#include "comm/backend.h"
#include "comm/nccl/cuda_memory.h"

namespace ddp::test {

template <typename T>
struct DeviceVector {
  DeviceVector(const std::vector<T>& v, int dev)
      : n(v.size()), device(dev), mem(comm::cuda::device_alloc(v.size() * sizeof(T), dev)) {
    comm::cuda::copy_to_device(mem.get(), v.data(), v.size() * sizeof(T), dev);
  }
  comm::Buffer view() const { return comm::cuda::device_view(mem.get(), n, comm::dtype_of<T>(), device); }
  std::vector<T> host() const {
    std::vector<T> v(n);
    comm::cuda::copy_to_host(v.data(), mem.get(), n * sizeof(T), device);
    return v;
  }
  size_t n;
  int device;
  comm::cuda::DeviceMemory mem;
};

}  // namespace ddp::test
