// NcclProcessGroup's multi-buffer ops: buffer i of rank r is NCCL rank r × K + i of a clique of
// world × K (one communicator per local device; a list of one uses the group's communicator),
// so each op is the single-buffer NCCL call per buffer, grouped (nccl_multi_setup.cc).
#include "comm/nccl/nccl_process_group.h"
#include "comm/nccl/nccl_types.h"
#include "common/error.h"

namespace ddp::comm::nccl_backend {
namespace {

// The clique rank of buffer `index` of process `rank`.
int clique_rank(int rank, int index, size_t k) { return rank * static_cast<int>(k) + index; }

}  // namespace

WorkPtr NcclProcessGroup::do_all_reduce_multi(std::span<const Buffer> buffers, AllReduceOptions opts) {
  const ncclRedOp_t op = nccl_op("all_reduce_multi", opts.op, size() * static_cast<int>(buffers.size()));
  const ncclDataType_t type = nccl_dtype(buffers[0].dtype);
  return submit_multi({"all_reduce_multi", "ncclAllReduce", opts.timeout, buffers,
                       multi::shape_of(buffers, -1, static_cast<int>(opts.op)),
                       [&](ncclComm_t c, cudaStream_t s, size_t i) {
                         const Buffer& b = buffers[i];
                         return ncclAllReduce(b.data, b.data, b.count, type, op, c, s);
                       }});
}

WorkPtr NcclProcessGroup::do_broadcast_multi(std::span<const Buffer> buffers, BroadcastMultiOptions opts) {
  const ncclDataType_t type = nccl_dtype(buffers[0].dtype);
  const int root = clique_rank(opts.root, opts.root_index, buffers.size());
  return submit_multi({"broadcast_multi", "ncclBroadcast", opts.timeout, buffers,
                       multi::shape_of(buffers, opts.root_index),
                       [&](ncclComm_t c, cudaStream_t s, size_t i) {
                         const Buffer& b = buffers[i];
                         return ncclBroadcast(b.data, b.data, b.count, type, root, c, s);
                       }});
}

WorkPtr NcclProcessGroup::do_reduce_multi(std::span<const Buffer> buffers, ReduceMultiOptions opts) {
  const ncclRedOp_t op = nccl_op("reduce_multi", opts.op, size() * static_cast<int>(buffers.size()));
  const ncclDataType_t type = nccl_dtype(buffers[0].dtype);
  const int root = clique_rank(opts.root, opts.root_index, buffers.size());
  // In place: NCCL writes recvbuff on the root only, so every other buffer stays an input.
  return submit_multi({"reduce_multi", "ncclReduce", opts.timeout, buffers,
                       multi::shape_of(buffers, opts.root_index, static_cast<int>(opts.op)),
                       [&](ncclComm_t c, cudaStream_t s, size_t i) {
                         const Buffer& b = buffers[i];
                         return ncclReduce(b.data, b.data, b.count, type, op, root, c, s);
                       }});
}

// Output i receives, from communicator i, every clique rank's input in rank order: input j of
// rank r at element (r × K + j) × count, the layout process_group.h promises.
WorkPtr NcclProcessGroup::do_all_gather_multi(std::span<const Buffer> inputs, std::span<const Buffer> outputs,
                                              AllGatherOptions opts) {
  for (size_t i = 0; i < inputs.size(); ++i) {
    if (outputs[i].device != inputs[i].device) {
      DDP_THROW(InvalidArgument, "nccl all_gather_multi: input ", i, " is on ", inputs[i].device.str(),
                " but output ", i, " on ", outputs[i].device.str(), " (each pair shares its device)");
    }
  }
  const ncclDataType_t type = nccl_dtype(inputs[0].dtype);
  return submit_multi({"all_gather_multi", "ncclAllGather", opts.timeout, inputs, multi::shape_of(inputs),
                       [&](ncclComm_t c, cudaStream_t s, size_t i) {
                         return ncclAllGather(inputs[i].data, outputs[i].data, inputs[i].count, type, c, s);
                       }});
}

}  // namespace ddp::comm::nccl_backend
