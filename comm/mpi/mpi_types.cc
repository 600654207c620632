#include "comm/mpi/mpi_types.h"

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <type_traits>

#include "common/error.h"

namespace ddp::comm::mpi_backend {
namespace {

struct Sum { float operator()(float a, float b) const { return a + b; } };
struct Prod { float operator()(float a, float b) const { return a * b; } };
struct Min { float operator()(float a, float b) const { return std::min(a, b); } };
struct Max { float operator()(float a, float b) const { return std::max(a, b); } };

// MPI_User_function: inout[i] = in[i] op inout[i], over 16-bit floats carried as uint16.
template <float (*ToF)(uint16_t), uint16_t (*FromF)(float), typename Op>
void reduce16(void* in, void* inout, int* len, MPI_Datatype*) {
  const auto* a = static_cast<const uint16_t*>(in);
  auto* b = static_cast<uint16_t*>(inout);
  Op op;
  for (int i = 0; i < *len; ++i) b[i] = FromF(op(ToF(a[i]), ToF(b[i])));
}

template <float (*ToF)(uint16_t), uint16_t (*FromF)(float)>
MPI_User_function* user_fn(ReduceOp op) {
  switch (op) {
    case ReduceOp::kSum:
    case ReduceOp::kAvg: return &reduce16<ToF, FromF, Sum>;
    case ReduceOp::kProduct: return &reduce16<ToF, FromF, Prod>;
    case ReduceOp::kMin: return &reduce16<ToF, FromF, Min>;
    case ReduceOp::kMax: return &reduce16<ToF, FromF, Max>;
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
    MPI_User_function* fn = d == 0 ? user_fn<half_to_float, float_to_half>(op)
                                   : user_fn<bfloat16_to_float, float_to_bfloat16>(op);
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

template <typename T>
void divide_typed(void* data, size_t n, int d) {
  auto* p = static_cast<T*>(data);
  for (size_t i = 0; i < n; ++i) {
    if constexpr (std::is_integral_v<T>) {
      p[i] = static_cast<T>(static_cast<int64_t>(p[i]) / d);
    } else {
      p[i] = static_cast<T>(p[i] / static_cast<T>(d));
    }
  }
}

template <float (*ToF)(uint16_t), uint16_t (*FromF)(float)>
void divide16(void* data, size_t n, int d) {
  auto* p = static_cast<uint16_t*>(data);
  for (size_t i = 0; i < n; ++i) p[i] = FromF(ToF(p[i]) / static_cast<float>(d));
}

}  // namespace

MPI_Datatype mpi_dtype(DType dtype) {
  switch (dtype) {
    case DType::kFloat32: return MPI_FLOAT;
    case DType::kFloat64: return MPI_DOUBLE;
    case DType::kFloat16: return MPI_UINT16_T;
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

void divide_by(const Buffer& buf, int divisor) {
  if (divisor == 1 || buf.count == 0) return;
  switch (buf.dtype) {
    case DType::kFloat32: return divide_typed<float>(buf.data, buf.count, divisor);
    case DType::kFloat64: return divide_typed<double>(buf.data, buf.count, divisor);
    case DType::kFloat16: return divide16<half_to_float, float_to_half>(buf.data, buf.count, divisor);
    case DType::kBFloat16: return divide16<bfloat16_to_float, float_to_bfloat16>(buf.data, buf.count, divisor);
    case DType::kInt8: return divide_typed<int8_t>(buf.data, buf.count, divisor);
    case DType::kUInt8: return divide_typed<uint8_t>(buf.data, buf.count, divisor);
    case DType::kInt32: return divide_typed<int32_t>(buf.data, buf.count, divisor);
    case DType::kInt64: return divide_typed<int64_t>(buf.data, buf.count, divisor);
  }
}

}  // namespace ddp::comm::mpi_backend
