#include "comm/reduce_kernels.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <functional>
#include <type_traits>

#include "comm/cpu_features.h"
#include "comm/half_float.h"
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
// The 16-bit floats convert inline (comm/half_float.h), so their loops vectorize too.
struct Half {
  using S = uint16_t;
  using C = float;
  static C load(S v) { return half_float::f16_to_f32(v); }
  static S store(C v) { return half_float::f32_to_f16(v); }
};
struct BFloat {
  using S = uint16_t;
  using C = float;
  static C load(S v) { return half_float::bf16_to_f32(v); }
  static S store(C v) { return half_float::f32_to_bf16(v); }
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
template <typename Arith>
struct OpWrapping {
  template <typename C>
  static C f(C a, C b) {
    if constexpr (std::is_integral_v<C>) {
      using U = std::conditional_t<(sizeof(C) < sizeof(unsigned)), unsigned, std::make_unsigned_t<C>>;
      return static_cast<C>(static_cast<U>(Arith{}(static_cast<U>(a), static_cast<U>(b))));
    } else {
      return Arith{}(a, b);
    }
  }
};
using OpSum = OpWrapping<std::plus<>>;
using OpProd = OpWrapping<std::multiplies<>>;

// Bitwise ops are only instantiated for floats to keep the switch total; dispatch() rejects
// them before any float loop runs.
template <typename Bits>
struct OpBitwise {
  template <typename C>
  static C f(C a, C b) {
    if constexpr (std::is_integral_v<C>) {
      return static_cast<C>(Bits{}(a, b));
    } else {
      return a;
    }
  }
};
using OpAnd = OpBitwise<std::bit_and<>>;
using OpOr = OpBitwise<std::bit_or<>>;
using OpXor = OpBitwise<std::bit_xor<>>;

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

// The vectorized loops: typed, aligned, non-overlapping (restrict). Always inlined, so that a
// caller built for AVX2 (below) builds them so too.
#define DDP_LOOP [[gnu::always_inline]] inline

template <typename P, typename Op>
DDP_LOOP void loop2(typename P::S* __restrict d, const typename P::S* __restrict s, size_t n) {
  for (size_t i = 0; i < n; ++i) d[i] = P::store(Op::f(P::load(d[i]), P::load(s[i])));
}

// d = s op d: the operand order when the output is the second input (MPI's user functions).
template <typename P, typename Op>
DDP_LOOP void loop2_reversed(typename P::S* __restrict d, const typename P::S* __restrict s, size_t n) {
  for (size_t i = 0; i < n; ++i) d[i] = P::store(Op::f(P::load(s[i]), P::load(d[i])));
}

template <typename P, typename Op>
DDP_LOOP void loop3(typename P::S* __restrict d, const typename P::S* __restrict a,
                    const typename P::S* __restrict b, size_t n) {
  for (size_t i = 0; i < n; ++i) d[i] = P::store(Op::f(P::load(a[i]), P::load(b[i])));
}

// d[i] = d[i] op s[i], and c[i] = the same.
template <typename P, typename Op>
DDP_LOOP void loop2_copy(typename P::S* __restrict d, const typename P::S* __restrict s,
                         typename P::S* __restrict c, size_t n) {
  for (size_t i = 0; i < n; ++i) c[i] = d[i] = P::store(Op::f(P::load(d[i]), P::load(s[i])));
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

// float16, aligned: d[i] = x[i] op y[i] (and c[i] the same, unless c is null), a block at a
// time widened to float (F16C where the CPU has it: comm/half_float.h), combined by the float
// loop, and narrowed. d may be exactly x or y: a block is read before it is written.
template <typename Op>
DDP_LOOP void half_blocks(uint16_t* d, const uint16_t* x, const uint16_t* y, uint16_t* c, size_t n) {
  constexpr size_t kBlock = 512;
  float fx[kBlock], fy[kBlock];
  for (size_t i = 0; i < n; i += kBlock) {
    const size_t m = std::min(kBlock, n - i);
    half_float::f16_to_f32_n(fx, x + i, m);
    half_float::f16_to_f32_n(fy, y + i, m);
    loop2<Plain<float>, Op>(fx, fy, m);
    half_float::f32_to_f16_n(d + i, fx, m);
    if (c != nullptr) std::memcpy(c + i, d + i, m * sizeof(uint16_t));
  }
}

// The aligned loops, each element converted and combined in one pass.
template <typename P, typename Op>
DDP_LOOP void fused(void* dst, const void* a, const void* b, size_t n) {
  using S = typename P::S;
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

template <typename P, typename Op>
DDP_LOOP void fused_copy(void* dst, const void* src, void* also, size_t n) {
  using S = typename P::S;
  loop2_copy<P, Op>(static_cast<S*>(dst), static_cast<const S*>(src), static_cast<S*>(also), n);
}

// 16-bit floats convert every element both ways: compute-bound, so their loops are built for
// AVX2 too and run so where the CPU has it. The other types' loops are memory-bound, where AVX2
// gains nothing, so they stay baseline (one build runs on every x86-64).
template <typename P, typename Op>
DDP_TARGET_AVX2 void fused_avx2(void* dst, const void* a, const void* b, size_t n) {
  fused<P, Op>(dst, a, b, n);
}

template <typename P, typename Op>
DDP_TARGET_AVX2 void fused_copy_avx2(void* dst, const void* src, void* also, size_t n) {
  fused_copy<P, Op>(dst, src, also, n);
}

template <typename Op>
DDP_TARGET_AVX2 void half_blocks_avx2(uint16_t* d, const uint16_t* x, const uint16_t* y, uint16_t* c,
                                      size_t n) {
  half_blocks<Op>(d, x, y, c, n);
}

template <typename P>
constexpr bool kSixteenBit = std::is_same_v<P, Half> || std::is_same_v<P, BFloat>;

// b == nullptr: dst op= a. Otherwise dst = a op b.
template <typename P, typename Op>
void run(void* dst, const void* a, const void* b, size_t n) {
  using S = typename P::S;
  if (!aligned<S>(dst) || !aligned<S>(a) || (b != nullptr && !aligned<S>(b))) {
    if (b == nullptr) return loop_misaligned<P, Op>(dst, dst, a, n);
    return loop_misaligned<P, Op>(dst, a, b, n);
  }
  if constexpr (std::is_same_v<P, Half>) {
    if (half_float::f16c_in_use()) {  // and so AVX2
      auto* d = static_cast<uint16_t*>(dst);
      const auto* x = b == nullptr ? d : static_cast<const uint16_t*>(a);
      const auto* y = static_cast<const uint16_t*>(b == nullptr ? a : b);
      return half_blocks_avx2<Op>(d, x, y, nullptr, n);
    }
  }
  if constexpr (kSixteenBit<P>) {
    if (cpu_features().avx2) return fused_avx2<P, Op>(dst, a, b, n);
  }
  fused<P, Op>(dst, a, b, n);
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
  if constexpr (std::is_same_v<P, Half>) {
    if (half_float::f16c_in_use()) {
      auto* d = static_cast<uint16_t*>(dst);
      return half_blocks_avx2<Op>(d, d, static_cast<const uint16_t*>(src), static_cast<uint16_t*>(also), n);
    }
  }
  if constexpr (kSixteenBit<P>) {
    if (cpu_features().avx2) return fused_copy_avx2<P, Op>(dst, src, also, n);
  }
  fused_copy<P, Op>(dst, src, also, n);
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
