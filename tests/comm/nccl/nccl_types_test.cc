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
  CHECK(nccl_op("all_reduce", ReduceOp::kAvg) == ncclAvg);
  CHECK(nccl_op("all_reduce", ReduceOp::kProduct) == ncclProd);
  CHECK_THROWS_WITH_AS(nccl_op("reduce_multi", ReduceOp::kBxor), doctest::Contains("nccl reduce_multi"),
                       InvalidArgument);
}
