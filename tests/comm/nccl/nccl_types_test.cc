// Our dtypes and reduce ops as NCCL's (no GPU needed).
#include "comm/nccl/nccl_types.h"

#include <doctest/doctest.h>

#include "common/error.h"

using namespace ddp;
using namespace ddp::comm;
using namespace ddp::comm::nccl_backend;

TEST_CASE("nccl types: every dtype maps; every arithmetic op maps; bitwise ops are InvalidArgument") {
  CHECK(nccl_dtype(DType::kFloat32) == ncclFloat32);
  CHECK(nccl_dtype(DType::kBFloat16) == ncclBfloat16);
  CHECK(nccl_dtype(DType::kUInt8) == ncclUint8);
  CHECK(nccl_dtype(DType::kInt64) == ncclInt64);
  CHECK(nccl_op("all_reduce", ReduceOp::kAvg, 2) == ncclAvg);
  CHECK(nccl_op("all_reduce", ReduceOp::kProduct, 2) == ncclProd);
  CHECK_THROWS_WITH_AS(nccl_op("reduce_multi", ReduceOp::kBxor, 2), doctest::Contains("nccl reduce_multi"),
                       InvalidArgument);
}

// NCCL before 2.29.7 leaves the tail of a one-rank avg's output unwritten (NVIDIA/nccl#1950;
// seen here on an H100: reduce_scatter float64 avg, 4099 elements, the last one not written).
TEST_CASE("nccl types: avg over one rank is ncclSum (a copy), over more it is ncclAvg") {
  CHECK(nccl_op("reduce_scatter", ReduceOp::kAvg, 1) == ncclSum);
  CHECK(nccl_op("reduce_scatter", ReduceOp::kAvg, 3) == ncclAvg);
  CHECK(nccl_op("reduce_scatter", ReduceOp::kMax, 1) == ncclMax);
}
