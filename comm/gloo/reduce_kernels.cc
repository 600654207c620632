#include "comm/gloo/reduce_kernels.h"

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <type_traits>

#include "common/error.h"

namespace ddp::comm::gloo_backend {
namespace {

struct Sum { template <typename T> T operator()(T a, T b) const { return static_cast<T>(a + b); } };
struct Prod { template <typename T> T operator()(T a, T b) const { return static_cast<T>(a * b); } };
struct Min { template <typename T> T operator()(T a, T b) const { return std::min(a, b); } };
struct Max { template <typename T> T operator()(T a, T b) const { return std::max(a, b); } };
struct Band { template <typename T> T operator()(T a, T b) const { return static_cast<T>(a & b); } };
struct Bor { template <typename T> T operator()(T a, T b) const { return static_cast<T>(a | b); } };
struct Bxor { template <typename T> T operator()(T a, T b) const { return static_cast<T>(a ^ b); } };

// Elements are read with memcpy: Gloo hands out byte offsets with no alignment promise.
template <typename T>
bool aligned(const void* p) {
  return reinterpret_cast<uintptr_t>(p) % alignof(T) == 0;
}

template <typename T, typename Op>
void apply(void* c, const void* a, const void* b, size_t n) {
  if (aligned<T>(c) && aligned<T>(a) && aligned<T>(b)) {
    // The common case: a plain loop the compiler vectorizes.
    T* pc = static_cast<T*>(c);
    const T* pa = static_cast<const T*>(a);
    const T* pb = static_cast<const T*>(b);
    Op op;
    for (size_t i = 0; i < n; ++i) pc[i] = op(pa[i], pb[i]);
    return;
  }
  auto* pc = static_cast<unsigned char*>(c);
  const auto* pa = static_cast<const unsigned char*>(a);
  const auto* pb = static_cast<const unsigned char*>(b);
  Op op;
  for (size_t i = 0; i < n; ++i) {
    T x, y;
    std::memcpy(&x, pa + i * sizeof(T), sizeof(T));
    std::memcpy(&y, pb + i * sizeof(T), sizeof(T));
    T z = op(x, y);
    std::memcpy(pc + i * sizeof(T), &z, sizeof(T));
  }
}

// 16-bit floats: widen, reduce in float, round back.
template <float (*ToF)(uint16_t), uint16_t (*FromF)(float), typename Op>
void apply16(void* c, const void* a, const void* b, size_t n) {
  auto* pc = static_cast<unsigned char*>(c);
  const auto* pa = static_cast<const unsigned char*>(a);
  const auto* pb = static_cast<const unsigned char*>(b);
  Op op;
  for (size_t i = 0; i < n; ++i) {
    uint16_t x, y;
    std::memcpy(&x, pa + 2 * i, 2);
    std::memcpy(&y, pb + 2 * i, 2);
    uint16_t z = FromF(op(ToF(x), ToF(y)));
    std::memcpy(pc + 2 * i, &z, 2);
  }
}

template <typename Op>
ReduceFn for_dtype(DType dtype) {
  switch (dtype) {
    case DType::kFloat32: return apply<float, Op>;
    case DType::kFloat64: return apply<double, Op>;
    case DType::kFloat16: return apply16<half_to_float, float_to_half, Op>;
    case DType::kBFloat16: return apply16<bfloat16_to_float, float_to_bfloat16, Op>;
    case DType::kInt8: return apply<int8_t, Op>;
    case DType::kUInt8: return apply<uint8_t, Op>;
    case DType::kInt32: return apply<int32_t, Op>;
    case DType::kInt64: return apply<int64_t, Op>;
  }
  DDP_THROW(InvalidArgument, "reduce: unknown dtype ", static_cast<int>(dtype));
}

template <typename Op>
ReduceFn for_integer(DType dtype) {
  switch (dtype) {
    case DType::kInt8: return apply<int8_t, Op>;
    case DType::kUInt8: return apply<uint8_t, Op>;
    case DType::kInt32: return apply<int32_t, Op>;
    case DType::kInt64: return apply<int64_t, Op>;
    default: break;
  }
  DDP_THROW(InvalidArgument, "reduce: bitwise ops need an integer dtype, got ", to_string(dtype));
}

template <typename T>
void divide_typed(void* data, size_t n, int d) {
  auto* p = static_cast<unsigned char*>(data);
  for (size_t i = 0; i < n; ++i) {
    T x;
    std::memcpy(&x, p + i * sizeof(T), sizeof(T));
    if constexpr (std::is_integral_v<T>) {
      x = static_cast<T>(static_cast<int64_t>(x) / d);  // d may not fit in T (int8, 200 ranks)
    } else {
      x = static_cast<T>(x / static_cast<T>(d));
    }
    std::memcpy(p + i * sizeof(T), &x, sizeof(T));
  }
}

template <float (*ToF)(uint16_t), uint16_t (*FromF)(float)>
void divide16(void* data, size_t n, int d) {
  auto* p = static_cast<unsigned char*>(data);
  for (size_t i = 0; i < n; ++i) {
    uint16_t x;
    std::memcpy(&x, p + 2 * i, 2);
    x = FromF(ToF(x) / static_cast<float>(d));
    std::memcpy(p + 2 * i, &x, 2);
  }
}

}  // namespace

ReduceFn reduce_fn(DType dtype, ReduceOp op) {
  switch (op) {
    case ReduceOp::kSum:
    case ReduceOp::kAvg: return for_dtype<Sum>(dtype);
    case ReduceOp::kProduct: return for_dtype<Prod>(dtype);
    case ReduceOp::kMin: return for_dtype<Min>(dtype);
    case ReduceOp::kMax: return for_dtype<Max>(dtype);
    case ReduceOp::kBand: return for_integer<Band>(dtype);
    case ReduceOp::kBor: return for_integer<Bor>(dtype);
    case ReduceOp::kBxor: return for_integer<Bxor>(dtype);
  }
  DDP_THROW(InvalidArgument, "reduce: unknown reduce op ", static_cast<int>(op));
}

void divide_by(const Buffer& buf, int divisor) {
  if (divisor == 1 || buf.count == 0) return;
  switch (buf.dtype) {
    case DType::kFloat32: return divide_typed<float>(buf.data, buf.count, divisor);
    case DType::kFloat64: return divide_typed<double>(buf.data, buf.count, divisor);
    case DType::kFloat16: return divide16<half_to_float, float_to_half>(buf.data, buf.count, divisor);
    case DType::kBFloat16: return divide16<bfloat16_to_float, float_to_bfloat16>(buf.data, buf.count, divisor);
    case DType::kInt8: return divide_typed<int8_t>(buf.data, buf.count, divisor);
    case DType::kUInt8: return divide_typed<uint8_t>(buf.data, buf.count, divisor);
    case DType::kInt32: return divide_typed<int32_t>(buf.data, buf.count, divisor);
    case DType::kInt64: return divide_typed<int64_t>(buf.data, buf.count, divisor);
  }
}

}  // namespace ddp::comm::gloo_backend
