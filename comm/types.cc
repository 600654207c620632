#include "comm/types.h"

#include <algorithm>

#include "comm/half_float.h"
#include "common/error.h"

namespace ddp::comm {

size_t dtype_size(DType dtype) {
  switch (dtype) {
    case DType::kFloat32: return 4;
    case DType::kFloat64: return 8;
    case DType::kFloat16:
    case DType::kBFloat16: return 2;
    case DType::kInt8:
    case DType::kUInt8: return 1;
    case DType::kInt32: return 4;
    case DType::kInt64: return 8;
  }
  DDP_THROW(InvalidArgument, "unknown dtype ", static_cast<int>(dtype));
}

bool is_integer(DType dtype) {
  return dtype == DType::kInt8 || dtype == DType::kUInt8 || dtype == DType::kInt32 || dtype == DType::kInt64;
}

bool is_bitwise(ReduceOp op) {
  return op == ReduceOp::kBand || op == ReduceOp::kBor || op == ReduceOp::kBxor;
}

const char* to_string(DType dtype) {
  switch (dtype) {
    case DType::kFloat32: return "float32";
    case DType::kFloat64: return "float64";
    case DType::kFloat16: return "float16";
    case DType::kBFloat16: return "bfloat16";
    case DType::kInt8: return "int8";
    case DType::kUInt8: return "uint8";
    case DType::kInt32: return "int32";
    case DType::kInt64: return "int64";
  }
  return "unknown";
}

const char* to_string(ReduceOp op) {
  switch (op) {
    case ReduceOp::kSum: return "sum";
    case ReduceOp::kProduct: return "product";
    case ReduceOp::kMin: return "min";
    case ReduceOp::kMax: return "max";
    case ReduceOp::kAvg: return "avg";
    case ReduceOp::kBand: return "band";
    case ReduceOp::kBor: return "bor";
    case ReduceOp::kBxor: return "bxor";
  }
  return "unknown";
}

const char* to_string(DeviceType type) { return type == DeviceType::kCuda ? "cuda" : "cpu"; }

namespace {
std::string lower(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return std::tolower(c); });
  return s;
}
}  // namespace

DType parse_dtype(const std::string& name) {
  std::string n = lower(name);
  if (n == "float32" || n == "float" || n == "f32") return DType::kFloat32;
  if (n == "float64" || n == "double" || n == "f64") return DType::kFloat64;
  if (n == "float16" || n == "half" || n == "f16") return DType::kFloat16;
  if (n == "bfloat16" || n == "bf16") return DType::kBFloat16;
  if (n == "int8") return DType::kInt8;
  if (n == "uint8") return DType::kUInt8;
  if (n == "int32" || n == "int") return DType::kInt32;
  if (n == "int64" || n == "long") return DType::kInt64;
  DDP_THROW(InvalidArgument, "unknown dtype '", name,
            "' (choose float32, float64, float16, bfloat16, int8, uint8, int32, int64)");
}

ReduceOp parse_reduce_op(const std::string& name) {
  std::string n = lower(name);
  if (n == "sum") return ReduceOp::kSum;
  if (n == "product" || n == "prod") return ReduceOp::kProduct;
  if (n == "min") return ReduceOp::kMin;
  if (n == "max") return ReduceOp::kMax;
  if (n == "avg" || n == "mean") return ReduceOp::kAvg;
  if (n == "band") return ReduceOp::kBand;
  if (n == "bor") return ReduceOp::kBor;
  if (n == "bxor") return ReduceOp::kBxor;
  DDP_THROW(InvalidArgument, "unknown reduce op '", name,
            "' (choose sum, product, min, max, avg, band, bor, bxor)");
}

std::string Device::str() const {
  if (type == DeviceType::kCpu) return "cpu";
  return std::string("cuda:") + std::to_string(index);
}

Buffer Buffer::slice(size_t offset, size_t n) const {
  DDP_CHECK_LE(offset + n, count, "buffer slice out of range");
  Buffer b = *this;
  b.data = static_cast<char*>(data) + offset * dtype_size(dtype);
  b.count = n;
  return b;
}

bool overlap(const Buffer& a, const Buffer& b) {
  if (a.count == 0 || b.count == 0 || a.device != b.device) return false;
  const auto a0 = reinterpret_cast<uintptr_t>(a.data), b0 = reinterpret_cast<uintptr_t>(b.data);
  return a0 < b0 + b.bytes() && b0 < a0 + a.bytes();
}

float half_to_float(uint16_t h) { return half_float::f16_to_f32(h); }
uint16_t float_to_half(float f) { return half_float::f32_to_f16(f); }
float bfloat16_to_float(uint16_t b) { return half_float::bf16_to_f32(b); }
uint16_t float_to_bfloat16(float f) { return half_float::f32_to_bf16(f); }

}  // namespace ddp::comm
