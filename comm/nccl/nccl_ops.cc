// The ops of NcclProcessGroup (arguments checked by ProcessGroup, buffers on the group's device):
// NCCL calls queued on the group's stream (see nccl_process_group.h).
#include "comm/nccl/nccl_process_group.h"
#include "comm/nccl/nccl_types.h"
#include "common/error.h"

namespace ddp::comm::nccl_backend {
namespace {

char* at(const Buffer& b, size_t element) {
  return static_cast<char*>(b.data) + element * dtype_size(b.dtype);
}

void copy_on(cudaStream_t s, void* dst, const void* src, size_t bytes) {
  cudaError_t rc = cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, s);
  if (rc != cudaSuccess) DDP_THROW(BackendError, "nccl: cudaMemcpyAsync: ", cudaGetErrorString(rc));
}

}  // namespace

WorkPtr NcclProcessGroup::do_send(Buffer buf, int dst, SendOptions opts) {
  return submit(
      "send", opts.timeout, buf.count == 0,
      [=, this](cudaStream_t s, const Deadline& d) {
        settle("ncclSend", ncclSend(buf.data, buf.count, nccl_dtype(buf.dtype), dst, comm_, s), d);
      },
      detail::str(" to rank ", dst));
}

WorkPtr NcclProcessGroup::do_recv(Buffer buf, int src, RecvOptions opts) {
  return submit(
      "recv", opts.timeout, buf.count == 0,
      [=, this](cudaStream_t s, const Deadline& d) {
        settle("ncclRecv", ncclRecv(buf.data, buf.count, nccl_dtype(buf.dtype), src, comm_, s), d);
      },
      detail::str(" from rank ", src));
}

WorkPtr NcclProcessGroup::do_broadcast(Buffer buf, BroadcastOptions opts) {
  return submit("broadcast", opts.timeout, buf.count == 0, [=, this](cudaStream_t s, const Deadline& d) {
    settle("ncclBroadcast",
           ncclBroadcast(buf.data, buf.data, buf.count, nccl_dtype(buf.dtype), opts.root, comm_, s), d);
  });
}

WorkPtr NcclProcessGroup::do_all_reduce(Buffer buf, AllReduceOptions opts) {
  const ncclRedOp_t op = nccl_op("all_reduce", opts.op, size());
  return submit("all_reduce", opts.timeout, buf.count == 0, [=, this](cudaStream_t s, const Deadline& d) {
    settle("ncclAllReduce", ncclAllReduce(buf.data, buf.data, buf.count, nccl_dtype(buf.dtype), op, comm_, s),
           d);
  });
}

WorkPtr NcclProcessGroup::do_reduce(Buffer buf, ReduceOptions opts) {
  const ncclRedOp_t op = nccl_op("reduce", opts.op, size());
  return submit("reduce", opts.timeout, buf.count == 0, [=, this](cudaStream_t s, const Deadline& d) {
    settle("ncclReduce",
           ncclReduce(buf.data, buf.data, buf.count, nccl_dtype(buf.dtype), op, opts.root, comm_, s), d);
  });
}

WorkPtr NcclProcessGroup::do_all_gather(Buffer input, Buffer output, AllGatherOptions opts) {
  return submit("all_gather", opts.timeout, input.count == 0, [=, this](cudaStream_t s, const Deadline& d) {
    settle("ncclAllGather",
           ncclAllGather(input.data, output.data, input.count, nccl_dtype(input.dtype), comm_, s), d);
  });
}

WorkPtr NcclProcessGroup::do_reduce_scatter(Buffer input, Buffer output, ReduceScatterOptions opts) {
  const ncclRedOp_t op = nccl_op("reduce_scatter", opts.op, size());
  return submit(
      "reduce_scatter", opts.timeout, output.count == 0, [=, this](cudaStream_t s, const Deadline& d) {
        settle(
            "ncclReduceScatter",
            ncclReduceScatter(input.data, output.data, output.count, nccl_dtype(output.dtype), op, comm_, s),
            d);
      });
}

WorkPtr NcclProcessGroup::do_gather(Buffer input, Buffer output, GatherOptions opts) {
  return rooted("gather", Flow::kToRoot, input, output, opts.root, opts.timeout);
}

WorkPtr NcclProcessGroup::do_scatter(Buffer input, Buffer output, ScatterOptions opts) {
  return rooted("scatter", Flow::kFromRoot, output, input, opts.root, opts.timeout);
}

WorkPtr NcclProcessGroup::rooted(const char* op, Flow flow, Buffer part, Buffer whole, int root,
                                 Millis timeout) {
  const bool is_root = rank() == root;
  const bool gather = flow == Flow::kToRoot;
  return submit(op, timeout, part.count == 0, [=, this](cudaStream_t s, const Deadline& d) {
    const ncclDataType_t t = nccl_dtype(part.dtype);
    char* own = at(whole, part.count * rank());
    if (is_root && gather) copy_on(s, own, part.data, part.bytes());
    if (is_root && !gather) copy_on(s, part.data, own, part.bytes());
    ncclGroupStart();
    for (int r = 0; r < size(); ++r) {
      if (r == rank() || (!is_root && r != root)) continue;  // the root: every other rank; others: the root
      void* block = is_root ? at(whole, part.count * r) : part.data;
      if (gather == is_root) {  // the root of a gather, the others of a scatter
        ncclRecv(block, part.count, t, r, comm_, s);
      } else {
        ncclSend(block, part.count, t, r, comm_, s);
      }
    }
    settle(std::string(op) + " (grouped ncclSend/ncclRecv)", ncclGroupEnd(), d);
  });
}

WorkPtr NcclProcessGroup::do_all_to_all(Buffer input, Buffer output, AllToAllOptions opts) {
  const size_t per = input.count / static_cast<size_t>(size());
  return submit("all_to_all", opts.timeout, input.count == 0, [=, this](cudaStream_t s, const Deadline& d) {
    const ncclDataType_t t = nccl_dtype(input.dtype);
    copy_on(s, at(output, per * rank()), at(input, per * rank()), per * dtype_size(input.dtype));
    ncclGroupStart();
    for (int r = 0; r < size(); ++r) {
      if (r == rank()) continue;
      ncclSend(at(input, per * r), per, t, r, comm_, s);
      ncclRecv(at(output, per * r), per, t, r, comm_, s);
    }
    settle("all_to_all (grouped ncclSend/ncclRecv)", ncclGroupEnd(), d);
  });
}

WorkPtr NcclProcessGroup::do_barrier(BarrierOptions opts) {
  return submit("barrier", opts.timeout, false, [this](cudaStream_t s, const Deadline& d) {
    settle("barrier (ncclAllReduce of one int)",
           ncclAllReduce(scratch_, scratch_, 1, ncclInt32, ncclSum, comm_, s), d);
  });
}

}  // namespace ddp::comm::nccl_backend
