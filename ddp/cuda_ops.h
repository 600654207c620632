#pragma once
// The CUDA corner of the engine: raw device memory operations through the CUDA runtime.
// Compiled for real when libddp is built with the nccl backend (DDP_WITH_CUDA); otherwise every
// function throws InvalidArgument and available() is false. CUDA headers appear only in
// cuda_ops.cc. Copies are synchronous (cudaMemcpy): gradients are complete when they return.
#include <cstddef>

namespace ddp::cuda {

bool built();  // compiled with the CUDA runtime
int device_count() noexcept;  // visible GPUs; 0 when not built or none
void* allocate(size_t bytes, int device);  // zero-filled
void release(void* ptr, int device) noexcept;
// Either side may be host memory (device < 0).
void copy(void* dst, int dst_device, const void* src, int src_device, size_t bytes);
void zero(void* ptr, int device, size_t bytes);

}  // namespace ddp::cuda
