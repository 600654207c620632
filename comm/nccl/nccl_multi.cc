// NcclProcessGroup's multi-buffer ops: a list of one buffer is the single-buffer op (the group's
// one device); longer lists are refused until per-device communicators exist (issue 19).
#include "comm/nccl/nccl_process_group.h"
#include "common/error.h"

namespace ddp::comm::nccl_backend {
namespace {

void one_buffer_only(const char* op, size_t k) {
  if (k == 1) return;
  DDP_THROW(InvalidArgument, "nccl ", op, ": ", k,
            " buffers per rank are not supported yet (one communicator "
            "per local device is not built); pass one buffer, or use a tcp group, which stages CUDA lists "
            "through the host");
}

}  // namespace

WorkPtr NcclProcessGroup::do_all_reduce_multi(std::span<const Buffer> buffers, AllReduceOptions opts) {
  one_buffer_only("all_reduce_multi", buffers.size());
  return do_all_reduce(buffers[0], opts);
}

WorkPtr NcclProcessGroup::do_broadcast_multi(std::span<const Buffer> buffers, BroadcastMultiOptions opts) {
  one_buffer_only("broadcast_multi", buffers.size());
  return do_broadcast(buffers[0], {opts.root, opts.timeout});
}

WorkPtr NcclProcessGroup::do_reduce_multi(std::span<const Buffer> buffers, ReduceMultiOptions opts) {
  one_buffer_only("reduce_multi", buffers.size());
  return do_reduce(buffers[0], {opts.root, opts.op, opts.timeout});
}

WorkPtr NcclProcessGroup::do_all_gather_multi(std::span<const Buffer> inputs, std::span<const Buffer> outputs,
                                              AllGatherOptions opts) {
  one_buffer_only("all_gather_multi", inputs.size());
  return do_all_gather(inputs[0], outputs[0], opts);
}

}  // namespace ddp::comm::nccl_backend
