#pragma once
// Element-wise reduction kernels for the gloo backend: c[i] = a[i] op b[i] over typed
// elements, for every DType and ReduceOp the API has (Gloo ships only sum/product/min/max for
// a few types). float16/bfloat16 are reduced in float and rounded back (round to nearest even).
// kAvg reduces as kSum; the caller divides by the world size afterwards (divide_by).
// Bitwise ops on floating types are rejected earlier (ProcessGroup::check_reduce); asking here
// is an InvalidArgument. Kernels are pure functions, safe from any thread; c may alias a or b.
#include <cstddef>
#include <functional>

#include "comm/types.h"

namespace ddp::comm::gloo_backend {

using ReduceFn = std::function<void(void* c, const void* a, const void* b, size_t n)>;

ReduceFn reduce_fn(DType dtype, ReduceOp op);

// In place: buf[i] /= divisor (integers: truncating division, as NCCL's ncclAvg does).
void divide_by(const Buffer& buf, int divisor);

}  // namespace ddp::comm::gloo_backend
