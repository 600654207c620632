#pragma once
// Element-wise kernels for every DType and ReduceOp: the one place the project combines,
// divides and scales elements on the host. Used by the tcp, gloo and mpi backends and by the
// DDP engine (scale_buffer). Pure functions, safe from any thread.
//
// - Written as plain loops over restrict pointers so the compiler vectorizes them (this file
//   is built with -O3). Pointers need no alignment: misaligned views (Gloo hands out byte
//   offsets) take an element-by-element memcpy path with the same results.
// - Integer + and * wrap on overflow (computed in unsigned arithmetic: no undefined behaviour).
// - float16/bfloat16 are widened to float, combined, and rounded back (nearest even).
// - kAvg combines like kSum; finish_avg() divides afterwards. On integers that is a
//   truncating integer division of the wrapped sum (documented; torch rejects AVG on ints).
// - Bitwise ops on floating types are an InvalidArgument (ProcessGroup rejects them earlier).
#include <cstddef>

#include "comm/types.h"

namespace ddp::comm {

// dst[i] = dst[i] op src[i]. dst and src must not overlap.
void combine(void* dst, const void* src, size_t n, DType dtype, ReduceOp op);
// dst[i] = a[i] op b[i]. dst may be exactly a or exactly b; otherwise no overlap.
void combine3(void* dst, const void* a, const void* b, size_t n, DType dtype, ReduceOp op);
// dst[i] = dst[i] op src[i], and also[i] = the same, in one pass (a reduction published to a
// second place: the shared-memory all_reduce's slice into its slot). None of the three overlap.
void combine_copy(void* dst, const void* src, void* also, size_t n, DType dtype, ReduceOp op);
// dst[i] = dst[i] / divisor (kAvg's last step). Integers: truncating division in int64, so a
// divisor wider than the dtype (int8 over 200 ranks) still divides correctly.
void finish_avg(void* dst, size_t n, DType dtype, int divisor);
// dst[i] = dst[i] * factor. float32 multiplies by float(factor); float64, float16 and bfloat16
// multiply in double and round once to the dtype; integers multiply in double and truncate
// toward zero, wrapping to the dtype (values beyond int64 saturate).
void scale(void* dst, size_t n, DType dtype, double factor);

}  // namespace ddp::comm
