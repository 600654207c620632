#pragma once
// Our dtypes and reduce ops as NCCL's. NCCL has no bitwise reductions: InvalidArgument naming
// the op and the backends that have them.
#include <nccl.h>

#include "comm/types.h"

namespace ddp::comm::nccl_backend {

ncclDataType_t nccl_dtype(DType dtype);
ncclRedOp_t nccl_op(const char* op, ReduceOp rop);

}  // namespace ddp::comm::nccl_backend
