#pragma once
// The CUDA corner of the engine: raw device memory operations through the CUDA runtime, found
// at run time (a runtime already in the process, else libcudart.so): no CUDA headers, no link
// dependency, so libddp loads where CUDA is absent. Without a runtime, built() is false and
// every function but release() throws InvalidArgument. Copies are synchronous (cudaMemcpy):
// gradients are complete when they return.
#include <cstddef>

namespace ddp::cuda {

bool built();                              // a CUDA runtime was found
int device_count() noexcept;               // visible GPUs; 0 when not built or none
void* allocate(size_t bytes, int device);  // zero-filled
void release(void* ptr, int device) noexcept;
// Either side may be host memory (device < 0).
void copy(void* dst, int dst_device, const void* src, int src_device, size_t bytes);
void zero(void* ptr, int device, size_t bytes);

}  // namespace ddp::cuda
