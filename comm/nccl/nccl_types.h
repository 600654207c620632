#pragma once
// Our dtypes and reduce ops as NCCL's. NCCL has no bitwise reductions: InvalidArgument naming
// the op and the backends that have them.
#include <nccl.h>

#include "comm/types.h"

namespace ddp::comm::nccl_backend {

ncclDataType_t nccl_dtype(DType dtype);
// `nranks`: the communicator's rank count. On one rank avg is ncclSum (a copy): NCCL before
// 2.29.7 leaves the tail of a one-rank avg's output unwritten (NVIDIA/nccl#1950).
ncclRedOp_t nccl_op(const char* op, ReduceOp rop, int nranks);

}  // namespace ddp::comm::nccl_backend
