#include "ddp/torch/tensor_buffer.h"

#include <ATen/Functions.h>

#include "common/error.h"

namespace ddp::torch {

comm::DType dtype_of(at::ScalarType type, const std::string& what) {
  switch (type) {
    case at::kFloat: return comm::DType::kFloat32;
    case at::kDouble: return comm::DType::kFloat64;
    case at::kHalf: return comm::DType::kFloat16;
    case at::kBFloat16: return comm::DType::kBFloat16;
    case at::kChar: return comm::DType::kInt8;
    case at::kByte: return comm::DType::kUInt8;
    case at::kInt: return comm::DType::kInt32;
    case at::kLong: return comm::DType::kInt64;
    default:
      DDP_THROW(InvalidArgument, what, ": dtype ", c10::toString(type),
                " is not supported (float32, float64, float16, bfloat16, int8, uint8, int32, int64)");
  }
}

at::ScalarType scalar_type_of(comm::DType dtype) {
  switch (dtype) {
    case comm::DType::kFloat32: return at::kFloat;
    case comm::DType::kFloat64: return at::kDouble;
    case comm::DType::kFloat16: return at::kHalf;
    case comm::DType::kBFloat16: return at::kBFloat16;
    case comm::DType::kInt8: return at::kChar;
    case comm::DType::kUInt8: return at::kByte;
    case comm::DType::kInt32: return at::kInt;
    case comm::DType::kInt64: return at::kLong;
  }
  DDP_THROW(InvalidArgument, "unknown dtype ", static_cast<int>(dtype));
}

comm::Device device_of(const at::Device& device, const std::string& what) {
  if (device.is_cpu()) return comm::Device{};
  if (device.is_cuda()) return comm::Device{comm::DeviceType::kCuda, device.has_index() ? device.index() : 0};
  DDP_THROW(InvalidArgument, what, ": device ", device.str(), " is not supported (cpu or cuda)");
}

at::Device torch_device_of(const comm::Device& device) {
  if (!device.is_cuda()) return at::Device(at::kCPU);
  return at::Device(at::kCUDA, static_cast<c10::DeviceIndex>(device.index));
}

comm::Buffer buffer_of(const at::Tensor& tensor, const std::string& what) {
  if (!tensor.defined()) DDP_THROW(InvalidArgument, what, ": undefined tensor");
  if (!tensor.is_contiguous())
    DDP_THROW(InvalidArgument, what, ": tensor is not contiguous (call .contiguous())");
  if (tensor.is_sparse()) DDP_THROW(InvalidArgument, what, ": sparse tensors are not supported");
  comm::Buffer b;
  b.dtype = dtype_of(tensor.scalar_type(), what);
  b.device = device_of(tensor.device(), what);
  b.count = static_cast<size_t>(tensor.numel());
  b.data = tensor.data_ptr();
  return b;
}

at::Tensor tensor_of(const comm::Buffer& buffer, at::IntArrayRef sizes) {
  auto options =
      at::TensorOptions().dtype(scalar_type_of(buffer.dtype)).device(torch_device_of(buffer.device));
  return at::from_blob(buffer.data, sizes, options);
}

}  // namespace ddp::torch
