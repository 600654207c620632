#pragma once
// The few memory operations the engine performs on gradient memory, on the host or on a CUDA
// device: allocate, copy, zero, scale. Host memory is plain aligned heap memory. CUDA memory
// needs a build with the nccl backend (DDP_WITH_CUDA); without it a CUDA buffer is an
// InvalidArgument naming the operation. Not thread-safe per buffer; callers serialize.
#include <cstddef>

#include "comm/types.h"

namespace ddp {

// Owned memory for a bucket or a staging area: RAII, movable.
class DeviceMemory {
 public:
  DeviceMemory() = default;
  DeviceMemory(size_t bytes, comm::Device device);  // zero-filled
  ~DeviceMemory() noexcept;
  DeviceMemory(DeviceMemory&& other) noexcept;
  DeviceMemory& operator=(DeviceMemory&& other) noexcept;
  DeviceMemory(const DeviceMemory&) = delete;
  DeviceMemory& operator=(const DeviceMemory&) = delete;

  void* data() const { return data_; }
  size_t bytes() const { return bytes_; }
  const comm::Device& device() const { return device_; }
  comm::Buffer view(size_t count, comm::DType dtype) const;

 private:
  void release() noexcept;
  void* data_ = nullptr;
  size_t bytes_ = 0;
  comm::Device device_{};
};

// dst <- src (same count and dtype; devices may differ).
void copy_buffer(const comm::Buffer& dst, const comm::Buffer& src);
void zero_buffer(const comm::Buffer& buf);
// buf *= factor (comm::scale: floating dtypes in their own precision; integers truncate toward
// zero).
void scale_buffer(const comm::Buffer& buf, double factor);
// Converts between floating dtypes (float32/float64 <-> float16/bfloat16), elementwise, times
// `factor`: the compression hooks' cast. From float32 the product is taken in float (as the
// tensor's own arithmetic would), from float64 in double; a bucket-sized cast to or from
// float32 runs through the bulk conversions of comm/half_float.h.
void convert_buffer(const comm::Buffer& dst, const comm::Buffer& src, double factor = 1.0);

bool cuda_supported();

}  // namespace ddp
