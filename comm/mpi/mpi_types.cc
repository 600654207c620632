#include "comm/mpi/mpi_types.h"

#include "comm/reduce_kernels.h"
#include "common/error.h"

namespace ddp::comm::mpi_backend {
namespace {

// MPI_User_function: inout[i] = in[i] op inout[i], over 16-bit floats carried as uint16, by the
// shared kernels (in float, rounded back).
template <DType D, ReduceOp O>
void reduce16(void* in, void* inout, int* len, MPI_Datatype*) {
  combine3(inout, in, inout, static_cast<size_t>(*len), D, O);
}

template <DType D>
MPI_User_function* user_fn(ReduceOp op) {
  switch (op) {
    case ReduceOp::kSum:
    case ReduceOp::kAvg: return &reduce16<D, ReduceOp::kSum>;
    case ReduceOp::kProduct: return &reduce16<D, ReduceOp::kProduct>;
    case ReduceOp::kMin: return &reduce16<D, ReduceOp::kMin>;
    case ReduceOp::kMax: return &reduce16<D, ReduceOp::kMax>;
    default: break;
  }
  DDP_THROW(InvalidArgument, "mpi: ", to_string(op), " is not defined on 16-bit floats");
}

// One MPI_Op per (16-bit dtype, op), created on first use.
MPI_Op user_op(MpiRuntime& runtime, DType dtype, ReduceOp op) {
  static MPI_Op ops[2][4] = {{MPI_OP_NULL, MPI_OP_NULL, MPI_OP_NULL, MPI_OP_NULL},
                             {MPI_OP_NULL, MPI_OP_NULL, MPI_OP_NULL, MPI_OP_NULL}};
  static bool registered = false;
  const int d = dtype == DType::kFloat16 ? 0 : 1;
  const int o = op == ReduceOp::kAvg ? 0 : static_cast<int>(op);  // kSum..kMax are 0..3
  if (o > 3) DDP_THROW(InvalidArgument, "mpi: ", to_string(op), " is not defined on ", to_string(dtype));
  if (ops[d][o] == MPI_OP_NULL) {
    MPI_User_function* fn = d == 0 ? user_fn<DType::kFloat16>(op) : user_fn<DType::kBFloat16>(op);
    int rc = MPI_Op_create(fn, 1, &ops[d][o]);
    if (rc != MPI_SUCCESS) DDP_THROW(BackendError, "mpi: MPI_Op_create failed: ", mpi_error_string(rc));
    if (!registered) {
      registered = true;
      runtime.at_finalize([] {
        for (auto& row : ops) {
          for (auto& x : row) {
            if (x != MPI_OP_NULL) MPI_Op_free(&x);
          }
        }
      });
    }
  }
  return ops[d][o];
}

}  // namespace

MPI_Datatype mpi_dtype(DType dtype) {
  switch (dtype) {
    case DType::kFloat32: return MPI_FLOAT;
    case DType::kFloat64: return MPI_DOUBLE;
    case DType::kFloat16:
    case DType::kBFloat16: return MPI_UINT16_T;
    case DType::kInt8: return MPI_INT8_T;
    case DType::kUInt8: return MPI_UINT8_T;
    case DType::kInt32: return MPI_INT32_T;
    case DType::kInt64: return MPI_INT64_T;
  }
  DDP_THROW(InvalidArgument, "mpi: unknown dtype ", static_cast<int>(dtype));
}

MPI_Op mpi_op(MpiRuntime& runtime, DType dtype, ReduceOp op) {
  if (dtype == DType::kFloat16 || dtype == DType::kBFloat16) return user_op(runtime, dtype, op);
  switch (op) {
    case ReduceOp::kSum:
    case ReduceOp::kAvg: return MPI_SUM;
    case ReduceOp::kProduct: return MPI_PROD;
    case ReduceOp::kMin: return MPI_MIN;
    case ReduceOp::kMax: return MPI_MAX;
    case ReduceOp::kBand: return MPI_BAND;
    case ReduceOp::kBor: return MPI_BOR;
    case ReduceOp::kBxor: return MPI_BXOR;
  }
  DDP_THROW(InvalidArgument, "mpi: unknown reduce op ", static_cast<int>(op));
}

}  // namespace ddp::comm::mpi_backend
