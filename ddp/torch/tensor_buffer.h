#pragma once
// Tensors as comm::Buffer views and back: the bridge between LibTorch and our collectives.
// Nothing here copies: buffer_of() views a tensor's memory (the tensor must be contiguous and
// must outlive every op on the view), tensor_of() wraps a buffer as a tensor that does not own
// it (the buffer's owner must outlive the tensor). Dtypes map one to one where both sides have
// them (float32/64, float16, bfloat16, int8, uint8, int32, int64); anything else, a
// non-contiguous tensor or a device we cannot reach is an InvalidArgument naming `what`.
#include <ATen/core/Tensor.h>

#include <string>

#include "comm/types.h"

namespace ddp::torch {

comm::DType dtype_of(at::ScalarType type, const std::string& what);
at::ScalarType scalar_type_of(comm::DType dtype);
comm::Device device_of(const at::Device& device, const std::string& what);
at::Device torch_device_of(const comm::Device& device);

comm::Buffer buffer_of(const at::Tensor& tensor, const std::string& what);
at::Tensor tensor_of(const comm::Buffer& buffer, at::IntArrayRef sizes);

}  // namespace ddp::torch
