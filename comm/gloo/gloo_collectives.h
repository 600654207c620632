#pragma once
// The collectives of the gloo backend, each a blocking call on a connected Gloo context with
// buffers already validated, non-empty and on the CPU. Where Gloo has the op (broadcast,
// allreduce, reduce, allgather, gather, scatter, alltoall, barrier) it is used directly with
// our reduce kernels (every dtype, every ReduceOp); the rest is built from Gloo's primitives:
// - AVG: a sum, then a local division by the world size;
// - reduce_scatter: an allreduce of the input into scratch, then this rank's slice;
// - reduce keeps non-root buffers untouched (Gloo's ring writes partial sums into them).
// `tag` keeps concurrent ops apart (we pass the op's sequence number); Gloo exceptions escape
// unchanged for the caller to translate.
#include <chrono>
#include <cstdint>
#include <memory>

#include <gloo/context.h>

#include "comm/types.h"

namespace ddp::comm::gloo_backend {

struct OpArgs {
  std::shared_ptr<::gloo::Context> context;
  uint32_t tag = 0;
  std::chrono::milliseconds timeout{0};
};

void run_broadcast(const OpArgs& a, const Buffer& buf, int root);
void run_all_reduce(const OpArgs& a, const Buffer& buf, ReduceOp op);
void run_reduce(const OpArgs& a, const Buffer& buf, int root, ReduceOp op);
void run_all_gather(const OpArgs& a, const Buffer& input, const Buffer& output);
void run_gather(const OpArgs& a, const Buffer& input, const Buffer& output, int root);
void run_scatter(const OpArgs& a, const Buffer& input, const Buffer& output, int root);
void run_reduce_scatter(const OpArgs& a, const Buffer& input, const Buffer& output, ReduceOp op);
void run_all_to_all(const OpArgs& a, const Buffer& input, const Buffer& output);
void run_barrier(const OpArgs& a);

}  // namespace ddp::comm::gloo_backend
