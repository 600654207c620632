#pragma once
// Our element types and reduce ops as MPI sees them. float16/bfloat16 travel as MPI_UINT16_T and
// reduce through user-defined MPI_Ops over the shared kernels (comm/reduce_kernels.h: in float,
// rounded to nearest even); kAvg is MPI_SUM followed by finish_avg(world size) once the op
// completed. Call on the MPI thread (user-defined ops are created there on first use and freed
// before MPI_Finalize).
#include <mpi.h>

#include "comm/mpi/mpi_runtime.h"
#include "comm/types.h"

namespace ddp::comm::mpi_backend {

MPI_Datatype mpi_dtype(DType dtype);
MPI_Op mpi_op(MpiRuntime& runtime, DType dtype, ReduceOp op);

}  // namespace ddp::comm::mpi_backend
