#include "comm/reduce_kernels.h"

#include <cmath>
#include <cstdint>
#include <cstring>
#include <type_traits>

#include "common/error.h"

namespace ddp::comm {
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

// Calls fn(P{}) with the storage/compute policy of `dtype`.
template <typename Fn>
void with_dtype(DType dtype, Fn&& fn) {
  switch (dtype) {
    case DType::kFloat32: return fn(Plain<float>{});
    case DType::kFloat64: return fn(Plain<double>{});
    case DType::kFloat16: return fn(Half{});
    case DType::kBFloat16: return fn(BFloat{});
    case DType::kInt8: return fn(Plain<int8_t>{});
    case DType::kUInt8: return fn(Plain<uint8_t>{});
    case DType::kInt32: return fn(Plain<int32_t>{});
    case DType::kInt64: return fn(Plain<int64_t>{});
  }
  DDP_THROW(InvalidArgument, "unknown dtype ", static_cast<int>(dtype));
}

// Integer + and * in unsigned arithmetic: wraps instead of overflowing (UB on signed types).
// Types narrower than unsigned would be promoted to int, so * goes through unsigned itself.
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

// Bitwise ops are only instantiated for floats to keep the switch total; dispatch() rejects
// them before any float loop runs.
template <typename C>
C bit_and(C a, C b) {
  if constexpr (std::is_integral_v<C>) {
    return static_cast<C>(a & b);
  } else {
    return a;
  }
}

template <typename C>
C bit_or(C a, C b) {
  if constexpr (std::is_integral_v<C>) {
    return static_cast<C>(a | b);
  } else {
    return a;
  }
}

template <typename C>
C bit_xor(C a, C b) {
  if constexpr (std::is_integral_v<C>) {
    return static_cast<C>(a ^ b);
  } else {
    return a;
  }
}

struct OpSum {
  template <typename C>
  static C f(C a, C b) {
    return add(a, b);
  }
};
struct OpProd {
  template <typename C>
  static C f(C a, C b) {
    return mul(a, b);
  }
};
struct OpMin {  // std::min's rule: a unless b is smaller (a NaN in `a` is kept)
  template <typename C>
  static C f(C a, C b) {
    return b < a ? b : a;
  }
};
struct OpMax {  // std::max's rule: a unless b is larger
  template <typename C>
  static C f(C a, C b) {
    return a < b ? b : a;
  }
};
struct OpAnd {
  template <typename C>
  static C f(C a, C b) {
    return bit_and(a, b);
  }
};
struct OpOr {
  template <typename C>
  static C f(C a, C b) {
    return bit_or(a, b);
  }
};
struct OpXor {
  template <typename C>
  static C f(C a, C b) {
    return bit_xor(a, b);
  }
};

// The vectorized loops: typed, aligned, non-overlapping (restrict).
template <typename P, typename Op>
void loop2(typename P::S* __restrict d, const typename P::S* __restrict s, size_t n) {
  for (size_t i = 0; i < n; ++i) d[i] = P::store(Op::f(P::load(d[i]), P::load(s[i])));
}

// d = s op d: the operand order when the output is the second input (MPI's user functions).
template <typename P, typename Op>
void loop2_reversed(typename P::S* __restrict d, const typename P::S* __restrict s, size_t n) {
  for (size_t i = 0; i < n; ++i) d[i] = P::store(Op::f(P::load(s[i]), P::load(d[i])));
}

template <typename P, typename Op>
void loop3(typename P::S* __restrict d, const typename P::S* __restrict a, const typename P::S* __restrict b,
           size_t n) {
  for (size_t i = 0; i < n; ++i) d[i] = P::store(Op::f(P::load(a[i]), P::load(b[i])));
}

template <typename S>
bool aligned(const void* p) {
  return reinterpret_cast<uintptr_t>(p) % alignof(S) == 0;
}

template <typename S>
S get(const void* p, size_t i) {
  S v;
  std::memcpy(&v, static_cast<const unsigned char*>(p) + i * sizeof(S), sizeof(S));
  return v;
}

template <typename S>
void put(void* p, size_t i, S v) {
  std::memcpy(static_cast<unsigned char*>(p) + i * sizeof(S), &v, sizeof(S));
}

// Misaligned views: one element at a time through memcpy. Reads precede the write of the same
// index, so dst may be exactly a or b here too.
template <typename P, typename Op>
void loop_misaligned(void* d, const void* a, const void* b, size_t n) {
  using S = typename P::S;
  for (size_t i = 0; i < n; ++i) put<S>(d, i, P::store(Op::f(P::load(get<S>(a, i)), P::load(get<S>(b, i)))));
}

// b == nullptr: dst op= a. Otherwise dst = a op b.
template <typename P, typename Op>
void run(void* dst, const void* a, const void* b, size_t n) {
  using S = typename P::S;
  if (!aligned<S>(dst) || !aligned<S>(a) || (b != nullptr && !aligned<S>(b))) {
    if (b == nullptr) return loop_misaligned<P, Op>(dst, dst, a, n);
    return loop_misaligned<P, Op>(dst, a, b, n);
  }
  if (b == nullptr) {
    loop2<P, Op>(static_cast<S*>(dst), static_cast<const S*>(a), n);
  } else if (dst == a) {
    loop2<P, Op>(static_cast<S*>(dst), static_cast<const S*>(b), n);
  } else if (dst == b) {
    loop2_reversed<P, Op>(static_cast<S*>(dst), static_cast<const S*>(a), n);
  } else {
    loop3<P, Op>(static_cast<S*>(dst), static_cast<const S*>(a), static_cast<const S*>(b), n);
  }
}

// dst[i] = dst[i] op src[i], then also[i] = dst[i], in one pass (all three disjoint).
template <typename P, typename Op>
void run_copy(void* dst, const void* src, void* also, size_t n) {
  using S = typename P::S;
  if (!aligned<S>(dst) || !aligned<S>(src) || !aligned<S>(also)) {
    loop_misaligned<P, Op>(dst, dst, src, n);
    std::memcpy(also, dst, n * sizeof(S));
    return;
  }
  S* __restrict d = static_cast<S*>(dst);
  S* __restrict c = static_cast<S*>(also);
  const S* __restrict s = static_cast<const S*>(src);
  for (size_t i = 0; i < n; ++i) c[i] = d[i] = P::store(Op::f(P::load(d[i]), P::load(s[i])));
}

// Calls fn(Op{}) with the element function of `op` (kAvg combines as kSum).
template <typename Fn>
void with_op(ReduceOp op, Fn&& fn) {
  switch (op) {
    case ReduceOp::kSum:
    case ReduceOp::kAvg: return fn(OpSum{});
    case ReduceOp::kProduct: return fn(OpProd{});
    case ReduceOp::kMin: return fn(OpMin{});
    case ReduceOp::kMax: return fn(OpMax{});
    case ReduceOp::kBand: return fn(OpAnd{});
    case ReduceOp::kBor: return fn(OpOr{});
    case ReduceOp::kBxor: return fn(OpXor{});
  }
  DDP_THROW(InvalidArgument, "unknown reduce op ", static_cast<int>(op));
}

// Calls fn(P{}, Op{}) for `dtype` and `op`, after refusing a bitwise op on floats.
template <typename Fn>
void dispatch(DType dtype, ReduceOp op, Fn&& fn) {
  if (is_bitwise(op) && !is_integer(dtype)) {
    DDP_THROW(InvalidArgument, "reduce op ", to_string(op), " needs an integer dtype, got ",
              to_string(dtype));
  }
  with_dtype(dtype, [&](auto policy) { with_op(op, [&](auto element) { fn(policy, element); }); });
}

// dst[i] = f(dst[i]) over storage S; f is inlined, so the aligned loop vectorizes.
template <typename S, typename F>
void map_in_place(void* dst, size_t n, F f) {
  if (aligned<S>(dst)) {
    S* __restrict d = static_cast<S*>(dst);
    for (size_t i = 0; i < n; ++i) d[i] = f(d[i]);
    return;
  }
  for (size_t i = 0; i < n; ++i) put<S>(dst, i, f(get<S>(dst, i)));
}

// double -> int64 without undefined behaviour: NaN is 0, out-of-range values saturate.
int64_t to_int64(double v) {
  constexpr double kTwo63 = 9223372036854775808.0;
  if (std::isnan(v)) return 0;
  if (v >= kTwo63) return INT64_MAX;
  if (v < -kTwo63) return INT64_MIN;
  return static_cast<int64_t>(v);
}

// An int64 wrapped to the integer type T (two's complement, as the sums wrap).
template <typename T>
T wrap_to(int64_t v) {
  using U = std::make_unsigned_t<T>;
  return static_cast<T>(static_cast<U>(static_cast<uint64_t>(v)));
}

template <typename P>
void divide_typed(void* dst, size_t n, int divisor) {
  using S = typename P::S;
  using C = typename P::C;
  if constexpr (std::is_integral_v<C>) {
    // In int64: the divisor may not fit in C (int8 over 200 ranks).
    const int64_t div = divisor;
    map_in_place<S>(dst, n, [div](S v) { return static_cast<S>(static_cast<int64_t>(v) / div); });
  } else {
    const C div = static_cast<C>(divisor);
    map_in_place<S>(dst, n, [div](S v) { return P::store(P::load(v) / div); });
  }
}

template <typename P>
void scale_typed(void* dst, size_t n, double factor) {
  using S = typename P::S;
  using C = typename P::C;
  if constexpr (std::is_integral_v<C>) {
    map_in_place<S>(dst, n, [factor](S v) { return wrap_to<S>(to_int64(static_cast<double>(v) * factor)); });
  } else if constexpr (std::is_same_v<P, Plain<float>>) {
    const float f = static_cast<float>(factor);
    map_in_place<S>(dst, n, [f](S v) { return v * f; });
  } else {
    // float64 exactly; 16-bit floats: the product in double, rounded to float, then to S.
    map_in_place<S>(
        dst, n, [factor](S v) { return P::store(static_cast<C>(static_cast<double>(P::load(v)) * factor)); });
  }
}

}  // namespace

void combine(void* dst, const void* src, size_t n, DType dtype, ReduceOp op) {
  dispatch(dtype, op, [&](auto p, auto o) {
    if (n > 0) run<decltype(p), decltype(o)>(dst, src, nullptr, n);
  });
}

void combine3(void* dst, const void* a, const void* b, size_t n, DType dtype, ReduceOp op) {
  dispatch(dtype, op, [&](auto p, auto o) {
    if (n > 0) run<decltype(p), decltype(o)>(dst, a, b, n);
  });
}

void combine_copy(void* dst, const void* src, void* also, size_t n, DType dtype, ReduceOp op) {
  dispatch(dtype, op, [&](auto p, auto o) {
    if (n > 0) run_copy<decltype(p), decltype(o)>(dst, src, also, n);
  });
}

void finish_avg(void* dst, size_t n, DType dtype, int divisor) {
  if (n == 0 || divisor == 1) return;
  with_dtype(dtype, [&](auto policy) { divide_typed<decltype(policy)>(dst, n, divisor); });
}

void scale(void* dst, size_t n, DType dtype, double factor) {
  if (n == 0 || factor == 1.0) return;
  with_dtype(dtype, [&](auto policy) { scale_typed<decltype(policy)>(dst, n, factor); });
}

}  // namespace ddp::comm
