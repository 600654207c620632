#pragma once
// Element types, reduce operations, devices and buffer views: the vocabulary of every
// collective. A Buffer is a non-owning view; the caller keeps the memory alive until the
// op's Work completes.
#include <cstddef>
#include <cstdint>
#include <string>

namespace ddp::comm {

enum class DType : uint8_t { kFloat32, kFloat64, kFloat16, kBFloat16, kInt8, kUInt8, kInt32, kInt64 };
enum class ReduceOp : uint8_t { kSum, kProduct, kMin, kMax, kAvg, kBand, kBor, kBxor };
enum class DeviceType : uint8_t { kCpu, kCuda };

size_t dtype_size(DType dtype);
bool is_integer(DType dtype);
bool is_bitwise(ReduceOp op);
const char* to_string(DType dtype);
const char* to_string(ReduceOp op);
const char* to_string(DeviceType type);
// "float32"/"float"/"f32", "sum"/"SUM", ...; InvalidArgument names the text and the choices.
DType parse_dtype(const std::string& name);
ReduceOp parse_reduce_op(const std::string& name);

struct Device {
  DeviceType type = DeviceType::kCpu;
  int index = -1;  // CUDA ordinal; -1 on the CPU
  bool is_cuda() const { return type == DeviceType::kCuda; }
  std::string str() const;  // "cpu", "cuda:0"
  bool operator==(const Device&) const = default;
};

struct Buffer {
  void* data = nullptr;
  size_t count = 0;  // elements, not bytes
  DType dtype = DType::kFloat32;
  Device device{};
  size_t bytes() const { return count * dtype_size(dtype); }
  // A view of elements [offset, offset + n).
  Buffer slice(size_t offset, size_t n) const;
};

// Whether two views share a byte (same device, intersecting ranges; empty views never do).
bool overlap(const Buffer& a, const Buffer& b);

template <typename T>
constexpr DType dtype_of();
template <>
constexpr DType dtype_of<float>() {
  return DType::kFloat32;
}
template <>
constexpr DType dtype_of<double>() {
  return DType::kFloat64;
}
template <>
constexpr DType dtype_of<int8_t>() {
  return DType::kInt8;
}
template <>
constexpr DType dtype_of<uint8_t>() {
  return DType::kUInt8;
}
template <>
constexpr DType dtype_of<int32_t>() {
  return DType::kInt32;
}
template <>
constexpr DType dtype_of<int64_t>() {
  return DType::kInt64;
}

// A host view of a typed array: view(vec.data(), vec.size()).
template <typename T>
Buffer view(T* data, size_t count) {
  return Buffer{static_cast<void*>(data), count, dtype_of<std::remove_const_t<T>>(), Device{}};
}

// 16-bit floats: conversions used by reductions and compression hooks (round to nearest even;
// comm/half_float.h has their inline, vectorizable forms).
float half_to_float(uint16_t h);
uint16_t float_to_half(float f);
float bfloat16_to_float(uint16_t b);
uint16_t float_to_bfloat16(float f);

}  // namespace ddp::comm
