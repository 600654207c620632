#include "comm/tcp/reduce_kernels.h"

#include <cstdint>
#include <type_traits>

#include "common/error.h"

namespace ddp::comm::tcp {
namespace {

// Storage type S, compute type C, and the conversions between them.
template <typename T>
struct Plain {
  using S = T;
  using C = T;
  static C load(S v) { return v; }
  static S store(C v) { return v; }
};
struct Half {
  using S = uint16_t;
  using C = float;
  static C load(S v) { return half_to_float(v); }
  static S store(C v) { return float_to_half(v); }
};
struct BFloat {
  using S = uint16_t;
  using C = float;
  static C load(S v) { return bfloat16_to_float(v); }
  static S store(C v) { return float_to_bfloat16(v); }
};

// Integer + and * in unsigned arithmetic: wraps instead of overflowing (UB on signed types).
template <typename C>
C add(C a, C b) {
  if constexpr (std::is_integral_v<C>) {
    using U = std::make_unsigned_t<C>;
    return static_cast<C>(static_cast<U>(static_cast<U>(a) + static_cast<U>(b)));
  } else {
    return a + b;
  }
}
template <typename C>
C mul(C a, C b) {
  if constexpr (std::is_integral_v<C>) {
    using U = std::conditional_t<(sizeof(C) < sizeof(unsigned)), unsigned, std::make_unsigned_t<C>>;
    return static_cast<C>(static_cast<U>(static_cast<U>(a) * static_cast<U>(b)));
  } else {
    return a * b;
  }
}

struct OpSum { template <typename C> static C f(C a, C b) { return add(a, b); } };
struct OpProd { template <typename C> static C f(C a, C b) { return mul(a, b); } };
struct OpMin { template <typename C> static C f(C a, C b) { return b < a ? b : a; } };
struct OpMax { template <typename C> static C f(C a, C b) { return a < b ? b : a; } };
struct OpAnd { template <typename C> static C f(C a, C b) { if constexpr (std::is_integral_v<C>) return a & b; else return a; } };
struct OpOr { template <typename C> static C f(C a, C b) { if constexpr (std::is_integral_v<C>) return a | b; else return a; } };
struct OpXor { template <typename C> static C f(C a, C b) { if constexpr (std::is_integral_v<C>) return a ^ b; else return a; } };

template <typename P, typename Op>
void loop2(typename P::S* __restrict d, const typename P::S* __restrict s, size_t n) {
  for (size_t i = 0; i < n; ++i) d[i] = P::store(Op::f(P::load(d[i]), P::load(s[i])));
}
template <typename P, typename Op>
void loop3(typename P::S* __restrict d, const typename P::S* __restrict a, const typename P::S* __restrict b,
           size_t n) {
  for (size_t i = 0; i < n; ++i) d[i] = P::store(Op::f(P::load(a[i]), P::load(b[i])));
}

template <typename P, typename Op>
void run(void* dst, const void* a, const void* b, size_t n) {
  using S = typename P::S;
  if (b == nullptr) {
    loop2<P, Op>(static_cast<S*>(dst), static_cast<const S*>(a), n);
  } else if (dst == a) {
    loop2<P, Op>(static_cast<S*>(dst), static_cast<const S*>(b), n);
  } else {
    loop3<P, Op>(static_cast<S*>(dst), static_cast<const S*>(a), static_cast<const S*>(b), n);
  }
}

template <typename P>
void by_op(ReduceOp op, void* dst, const void* a, const void* b, size_t n) {
  switch (op) {
    case ReduceOp::kSum:
    case ReduceOp::kAvg: return run<P, OpSum>(dst, a, b, n);
    case ReduceOp::kProduct: return run<P, OpProd>(dst, a, b, n);
    case ReduceOp::kMin: return run<P, OpMin>(dst, a, b, n);
    case ReduceOp::kMax: return run<P, OpMax>(dst, a, b, n);
    case ReduceOp::kBand: return run<P, OpAnd>(dst, a, b, n);
    case ReduceOp::kBor: return run<P, OpOr>(dst, a, b, n);
    case ReduceOp::kBxor: return run<P, OpXor>(dst, a, b, n);
  }
  DDP_THROW(InvalidArgument, "unknown reduce op ", static_cast<int>(op));
}

// b == nullptr: dst op= a. Otherwise dst = a op b.
void dispatch(DType dtype, ReduceOp op, void* dst, const void* a, const void* b, size_t n) {
  if (n == 0) return;
  if (is_bitwise(op) && !is_integer(dtype)) {
    DDP_THROW(InvalidArgument, "reduce op ", to_string(op), " needs an integer dtype, got ", to_string(dtype));
  }
  switch (dtype) {
    case DType::kFloat32: return by_op<Plain<float>>(op, dst, a, b, n);
    case DType::kFloat64: return by_op<Plain<double>>(op, dst, a, b, n);
    case DType::kFloat16: return by_op<Half>(op, dst, a, b, n);
    case DType::kBFloat16: return by_op<BFloat>(op, dst, a, b, n);
    case DType::kInt8: return by_op<Plain<int8_t>>(op, dst, a, b, n);
    case DType::kUInt8: return by_op<Plain<uint8_t>>(op, dst, a, b, n);
    case DType::kInt32: return by_op<Plain<int32_t>>(op, dst, a, b, n);
    case DType::kInt64: return by_op<Plain<int64_t>>(op, dst, a, b, n);
  }
  DDP_THROW(InvalidArgument, "unknown dtype ", static_cast<int>(dtype));
}

template <typename P>
void divide(void* dst, size_t n, int divisor) {
  auto* d = static_cast<typename P::S*>(dst);
  using C = typename P::C;
  if constexpr (std::is_integral_v<C>) {
    for (size_t i = 0; i < n; ++i) d[i] = P::store(static_cast<C>(static_cast<int64_t>(P::load(d[i])) / divisor));
  } else {
    const C div = static_cast<C>(divisor);
    for (size_t i = 0; i < n; ++i) d[i] = P::store(P::load(d[i]) / div);
  }
}

}  // namespace

void combine(void* dst, const void* src, size_t n, DType dtype, ReduceOp op) {
  dispatch(dtype, op, dst, src, nullptr, n);
}

void combine3(void* dst, const void* a, const void* b, size_t n, DType dtype, ReduceOp op) {
  dispatch(dtype, op, dst, a, b, n);
}

void finish_avg(void* dst, size_t n, DType dtype, int divisor) {
  if (n == 0 || divisor == 1) return;
  switch (dtype) {
    case DType::kFloat32: return divide<Plain<float>>(dst, n, divisor);
    case DType::kFloat64: return divide<Plain<double>>(dst, n, divisor);
    case DType::kFloat16: return divide<Half>(dst, n, divisor);
    case DType::kBFloat16: return divide<BFloat>(dst, n, divisor);
    case DType::kInt8: return divide<Plain<int8_t>>(dst, n, divisor);
    case DType::kUInt8: return divide<Plain<uint8_t>>(dst, n, divisor);
    case DType::kInt32: return divide<Plain<int32_t>>(dst, n, divisor);
    case DType::kInt64: return divide<Plain<int64_t>>(dst, n, divisor);
  }
}

}  // namespace ddp::comm::tcp
