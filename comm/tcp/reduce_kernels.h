#pragma once
// Element-wise reduction kernels for every dtype and ReduceOp, written as simple loops over
// restrict pointers so the compiler vectorizes them (this file is built with -O3).
//
// - Integers wrap on overflow (computed in unsigned arithmetic: no undefined behaviour).
// - float16/bfloat16 are widened to float, combined, and rounded back (nearest even).
// - kAvg combines like kSum; finish_avg() divides afterwards. On integers that is a
//   truncating integer division of the wrapped sum (documented; torch rejects AVG on ints).
// - Bitwise ops on floating types are the caller's error (ProcessGroup::check_reduce).
#include <cstddef>

#include "comm/types.h"

namespace ddp::comm::tcp {

// dst[i] = dst[i] op src[i]. dst and src must not overlap.
void combine(void* dst, const void* src, size_t n, DType dtype, ReduceOp op);
// dst[i] = a[i] op b[i]. dst may be exactly a; otherwise no overlap.
void combine3(void* dst, const void* a, const void* b, size_t n, DType dtype, ReduceOp op);
// dst[i] = dst[i] / divisor (kAvg's last step).
void finish_avg(void* dst, size_t n, DType dtype, int divisor);

}  // namespace ddp::comm::tcp
