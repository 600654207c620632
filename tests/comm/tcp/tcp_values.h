#pragma once
// Typed values for the tcp backend's correctness tests: small integers that every dtype holds
// exactly, a reference reduction in double, and a comparison that names what differs.
#include <cmath>
#include <cstdint>
#include <cstring>
#include <stdexcept>
#include <string>
#include <vector>

#include "comm/types.h"

namespace ddp::comm::tcp::testing {

inline constexpr DType kAllTypes[] = {DType::kFloat32, DType::kFloat64, DType::kFloat16, DType::kBFloat16,
                                      DType::kInt8,    DType::kUInt8,   DType::kInt32,   DType::kInt64};
inline constexpr ReduceOp kAllOps[] = {ReduceOp::kSum, ReduceOp::kProduct, ReduceOp::kMin, ReduceOp::kMax,
                                       ReduceOp::kAvg, ReduceOp::kBand,    ReduceOp::kBor, ReduceOp::kBxor};

inline void put(DType t, void* base, size_t i, double v) {
  switch (t) {
    case DType::kFloat32: static_cast<float*>(base)[i] = static_cast<float>(v); break;
    case DType::kFloat64: static_cast<double*>(base)[i] = v; break;
    case DType::kFloat16: static_cast<uint16_t*>(base)[i] = float_to_half(static_cast<float>(v)); break;
    case DType::kBFloat16: static_cast<uint16_t*>(base)[i] = float_to_bfloat16(static_cast<float>(v)); break;
    case DType::kInt8: static_cast<int8_t*>(base)[i] = static_cast<int8_t>(v); break;
    case DType::kUInt8: static_cast<uint8_t*>(base)[i] = static_cast<uint8_t>(v); break;
    case DType::kInt32: static_cast<int32_t*>(base)[i] = static_cast<int32_t>(v); break;
    case DType::kInt64: static_cast<int64_t*>(base)[i] = static_cast<int64_t>(v); break;
  }
}

inline double get(DType t, const void* base, size_t i) {
  switch (t) {
    case DType::kFloat32: return static_cast<const float*>(base)[i];
    case DType::kFloat64: return static_cast<const double*>(base)[i];
    case DType::kFloat16: return half_to_float(static_cast<const uint16_t*>(base)[i]);
    case DType::kBFloat16: return bfloat16_to_float(static_cast<const uint16_t*>(base)[i]);
    case DType::kInt8: return static_cast<const int8_t*>(base)[i];
    case DType::kUInt8: return static_cast<const uint8_t*>(base)[i];
    case DType::kInt32: return static_cast<const int32_t*>(base)[i];
    case DType::kInt64: return static_cast<const int64_t*>(base)[i];
  }
  return 0;
}

// The value rank r contributes at index i for reduce op `op` (chosen so nothing overflows).
inline double value(ReduceOp op, int r, size_t i) {
  switch (op) {
    case ReduceOp::kProduct: return static_cast<double>((static_cast<size_t>(r) + i) % 2 + 1);
    case ReduceOp::kBand:
    case ReduceOp::kBor:
    case ReduceOp::kBxor: return static_cast<double>((static_cast<size_t>(r) * 3 + i) % 8);
    default: return static_cast<double>((static_cast<size_t>(r) + i) % 5 + 1);
  }
}

inline double reference(ReduceOp op, DType t, int world, size_t i) {
  double acc = value(op, 0, i);
  for (int r = 1; r < world; ++r) {
    double v = value(op, r, i);
    switch (op) {
      case ReduceOp::kSum:
      case ReduceOp::kAvg: acc += v; break;
      case ReduceOp::kProduct: acc *= v; break;
      case ReduceOp::kMin: acc = std::min(acc, v); break;
      case ReduceOp::kMax: acc = std::max(acc, v); break;
      case ReduceOp::kBand:
        acc = static_cast<double>(static_cast<int64_t>(acc) & static_cast<int64_t>(v));
        break;
      case ReduceOp::kBor:
        acc = static_cast<double>(static_cast<int64_t>(acc) | static_cast<int64_t>(v));
        break;
      case ReduceOp::kBxor:
        acc = static_cast<double>(static_cast<int64_t>(acc) ^ static_cast<int64_t>(v));
        break;
    }
  }
  if (op == ReduceOp::kAvg) acc = is_integer(t) ? std::trunc(acc / world) : acc / world;
  return acc;
}

inline bool close(DType t, double got, double want) {
  const double tol = (t == DType::kFloat16 || t == DType::kBFloat16) ? 2e-2 : 1e-6;
  return std::fabs(got - want) <= tol * std::max(1.0, std::fabs(want));
}

struct Filled {
  std::vector<char> bytes;
  DType dtype;
  size_t count;
  Buffer buffer() { return Buffer{bytes.data(), count, dtype, Device{}}; }
};

inline Filled filled(DType t, size_t n, double fill = 0) {
  Filled f{std::vector<char>(n * dtype_size(t) + 1), t, n};
  for (size_t i = 0; i < n; ++i) put(t, f.bytes.data(), i, fill);
  return f;
}

// Throws std::runtime_error naming the first index that differs (usable from rank threads).
inline void expect_at(const std::string& what, DType t, const void* base, size_t i, double want) {
  const double got = get(t, base, i);
  if (!close(t, got, want)) {
    throw std::runtime_error(what + " (" + to_string(t) + "): element " + std::to_string(i) + " is " +
                             std::to_string(got) + ", expected " + std::to_string(want));
  }
}

}  // namespace ddp::comm::tcp::testing
