#pragma once
// Typed values for the tcp backend's correctness tests: small integers that every dtype holds
// exactly, a reference reduction in double, and an exact comparison that names what differs.
#include <cstdint>
#include <cstring>
#include <stdexcept>
#include <string>
#include <vector>

#include "comm/types.h"
#include "tests/comm/reduction_inputs.h"

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

// The value rank r contributes at index i for reduce op `op` in dtype `t`: the reduction tests'
// shared inputs (tests/comm/reduction_inputs.h: no rank's buffer is the result, MIN/MAX from 2
// elements; no op's result another's; exact in every dtype). The bitwise ops: small bit patterns.
inline double value(DType t, ReduceOp op, int r, size_t i) {
  if (is_bitwise(op)) return static_cast<double>((static_cast<size_t>(r) * 3 + i) % 8);
  return ddp::test::reduction_input(t, op, r, i);
}

inline double reference(ReduceOp op, DType t, int world, size_t i) {
  if (!is_bitwise(op)) return ddp::test::reduction_result(t, op, world, i);
  auto acc = static_cast<int64_t>(value(t, op, 0, i));
  for (int r = 1; r < world; ++r) {
    const auto v = static_cast<int64_t>(value(t, op, r, i));
    acc = op == ReduceOp::kBand ? (acc & v) : op == ReduceOp::kBor ? (acc | v) : (acc ^ v);
  }
  return static_cast<double>(acc);
}

// The inputs' self-check for this world and count (reduction_inputs.h); throws naming what fails.
inline void check_oracle(DType t, ReduceOp op, int world, size_t first, size_t count) {
  const std::string failure = ddp::test::reduction_oracle_failure(t, op, world, first, count);
  if (!failure.empty()) throw std::runtime_error("the reference itself: " + failure);
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

// Throws std::runtime_error naming the first index that differs (usable from rank threads). Exact:
// every value and result here is a small integer that each dtype holds.
inline void expect_at(const std::string& what, DType t, const void* base, size_t i, double want) {
  const double got = get(t, base, i);
  if (got != want) {
    throw std::runtime_error(what + " (" + to_string(t) + "): element " + std::to_string(i) + " is " +
                             std::to_string(got) + ", expected " + std::to_string(want));
  }
}

}  // namespace ddp::comm::tcp::testing
