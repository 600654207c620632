#include "comm/nccl/nccl_types.h"

#include "common/error.h"

namespace ddp::comm::nccl_backend {

ncclDataType_t nccl_dtype(DType dtype) {
  switch (dtype) {
    case DType::kFloat32: return ncclFloat32;
    case DType::kFloat64: return ncclFloat64;
    case DType::kFloat16: return ncclFloat16;
    case DType::kBFloat16: return ncclBfloat16;
    case DType::kInt8: return ncclInt8;
    case DType::kUInt8: return ncclUint8;
    case DType::kInt32: return ncclInt32;
    case DType::kInt64: return ncclInt64;
  }
  DDP_THROW(InvalidArgument, "nccl: unknown dtype ", static_cast<int>(dtype));
}

ncclRedOp_t nccl_op(const char* op, ReduceOp rop, int nranks) {
  switch (rop) {
    case ReduceOp::kSum: return ncclSum;
    case ReduceOp::kProduct: return ncclProd;
    case ReduceOp::kMin: return ncclMin;
    case ReduceOp::kMax: return ncclMax;
    case ReduceOp::kAvg: return nranks == 1 ? ncclSum : ncclAvg;
    default: break;
  }
  DDP_THROW(InvalidArgument, "nccl ", op, ": NCCL has no bitwise reductions (", to_string(rop),
            "); use the gloo, mpi or tcp backend for them");
}

}  // namespace ddp::comm::nccl_backend
