#include "ddp/comm_hook.h"

#include <memory>
#include <string>

#include "common/error.h"
#include "ddp/device_ops.h"

namespace ddp {

CommHook allreduce_hook() {
  return [](comm::ProcessGroup& group, GradBucket& bucket) -> comm::WorkPtr {
    // The plain average over the group: the backend divides as it reduces (its AVG), which
    // saves a pass over the bucket after the collective.
    if (bucket.pre_divide == 1.0 && bucket.post_divide == static_cast<double>(group.size()) &&
        !comm::is_integer(bucket.buffer.dtype)) {
      return group.all_reduce(bucket.buffer, {comm::ReduceOp::kAvg});
    }
    scale_buffer(bucket.buffer, 1.0 / bucket.pre_divide);
    comm::WorkPtr work = group.all_reduce(bucket.buffer, {comm::ReduceOp::kSum});
    if (bucket.post_divide == 1.0) return work;
    comm::Buffer buf = bucket.buffer;
    double post = bucket.post_divide;
    return chain_work(
        work, [buf, post] { scale_buffer(buf, 1.0 / post); },
        "ddp bucket " + std::to_string(bucket.index) + " all_reduce");
  };
}

namespace {

CommHook compress_hook(comm::DType wire, const char* name) {
  return [wire, name](comm::ProcessGroup& group, GradBucket& bucket) -> comm::WorkPtr {
    comm::DType dt = bucket.buffer.dtype;
    if (dt != comm::DType::kFloat32 && dt != comm::DType::kFloat64) {
      DDP_THROW(InvalidArgument, name, ": bucket ", bucket.index, " holds ", comm::to_string(dt),
                " gradients; compression needs float32 or float64");
    }
    // The compressed copy lives until the chained Work has decompressed it.
    auto memory =
        std::make_shared<DeviceMemory>(bucket.buffer.count * comm::dtype_size(wire), bucket.buffer.device);
    comm::Buffer compressed = memory->view(bucket.buffer.count, wire);
    convert_buffer(compressed, bucket.buffer, 1.0 / bucket.divisor());
    comm::WorkPtr work = group.all_reduce(compressed, {comm::ReduceOp::kSum});
    comm::Buffer out = bucket.buffer;
    return chain_work(
        work, [memory, compressed, out] { convert_buffer(out, compressed); },
        std::string(name) + " bucket " + std::to_string(bucket.index));
  };
}

}  // namespace

CommHook fp16_compress_hook() { return compress_hook(comm::DType::kFloat16, "fp16_compress_hook"); }
CommHook bf16_compress_hook() { return compress_hook(comm::DType::kBFloat16, "bf16_compress_hook"); }

}  // namespace ddp
