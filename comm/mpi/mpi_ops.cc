// The ops of MpiProcessGroup (arguments checked by ProcessGroup): one MPI call each, on the
// MPI thread or, for a small collective, on the caller's (see mpi_process_group.h): a
// collective's start makes the nonblocking call when given a request, the blocking one when
// given none (mpi_runtime.h says which runs).
#include "comm/mpi/mpi_process_group.h"
#include "comm/mpi/mpi_types.h"
#include "comm/reduce_kernels.h"
#include "common/error.h"

namespace ddp::comm::mpi_backend {
namespace {
int n(const Buffer& b) { return static_cast<int>(b.count); }
}  // namespace

WorkPtr MpiProcessGroup::do_send(Buffer buf, int dst, SendOptions opts) {
  const int tag = mpi_tag("send", opts.tag);
  return submit(p2p("send", opts.timeout, buf, detail::str(" to rank ", dst, " (tag ", opts.tag, ")")),
                [=](MPI_Comm c, MPI_Request* r) {
                  return MPI_Isend(buf.data, n(buf), mpi_dtype(buf.dtype), dst, tag, c, r);
                });
}

WorkPtr MpiProcessGroup::do_recv(Buffer buf, int src, RecvOptions opts) {
  const int tag = mpi_tag("recv", opts.tag);
  return submit(p2p("recv", opts.timeout, buf, detail::str(" from rank ", src, " (tag ", opts.tag, ")")),
                [=](MPI_Comm c, MPI_Request* r) {
                  return MPI_Irecv(buf.data, n(buf), mpi_dtype(buf.dtype), src, tag, c, r);
                });
}

WorkPtr MpiProcessGroup::do_broadcast(Buffer buf, BroadcastOptions opts) {
  return submit(collective("broadcast", opts.timeout, buf), [=](MPI_Comm c, MPI_Request* r) {
    const MPI_Datatype t = mpi_dtype(buf.dtype);
    return r ? MPI_Ibcast(buf.data, n(buf), t, opts.root, c, r)
             : MPI_Bcast(buf.data, n(buf), t, opts.root, c);
  });
}

WorkPtr MpiProcessGroup::do_all_reduce(Buffer buf, AllReduceOptions opts) {
  MpiRuntime* rt = &runtime_;
  const int world = size();
  Spec spec = collective("all_reduce", opts.timeout, buf);
  if (spec.bytes <= p2p_bytes_) {
    spec.p2p_all_reduce = P2pAllReduceSpec{.rank = rank(), .size = world, .buf = buf, .op = opts.op};
  }
  // Each std::function here is an allocation: made only where used.
  std::function<void()> done;
  if (opts.op == ReduceOp::kAvg) done = [=] { finish_avg(buf.data, buf.count, buf.dtype, world); };
  Start start;
  if (!spec.p2p_all_reduce) {
    start = [=](MPI_Comm c, MPI_Request* r) {
      const MPI_Datatype t = mpi_dtype(buf.dtype);
      const MPI_Op o = mpi_op(*rt, buf.dtype, opts.op);
      return r ? MPI_Iallreduce(MPI_IN_PLACE, buf.data, n(buf), t, o, c, r)
               : MPI_Allreduce(MPI_IN_PLACE, buf.data, n(buf), t, o, c);
    };
  }
  return submit(spec, std::move(start), std::move(done));
}

WorkPtr MpiProcessGroup::do_reduce(Buffer buf, ReduceOptions opts) {
  MpiRuntime* rt = &runtime_;
  const bool root = rank() == opts.root;
  const int world = size();
  return submit(
      collective("reduce", opts.timeout, buf),
      [=](MPI_Comm c, MPI_Request* r) {
        const void* send = root ? MPI_IN_PLACE : buf.data;
        void* recv = root ? buf.data : nullptr;
        const MPI_Datatype t = mpi_dtype(buf.dtype);
        const MPI_Op o = mpi_op(*rt, buf.dtype, opts.op);
        return r ? MPI_Ireduce(send, recv, n(buf), t, o, opts.root, c, r)
                 : MPI_Reduce(send, recv, n(buf), t, o, opts.root, c);
      },
      [=] {
        if (root && opts.op == ReduceOp::kAvg) finish_avg(buf.data, buf.count, buf.dtype, world);
      });
}

WorkPtr MpiProcessGroup::do_all_gather(Buffer input, Buffer output, AllGatherOptions opts) {
  return submit(collective("all_gather", opts.timeout, input), [=](MPI_Comm c, MPI_Request* r) {
    MPI_Datatype t = mpi_dtype(input.dtype);
    return r ? MPI_Iallgather(input.data, n(input), t, output.data, n(input), t, c, r)
             : MPI_Allgather(input.data, n(input), t, output.data, n(input), t, c);
  });
}

WorkPtr MpiProcessGroup::do_gather(Buffer input, Buffer output, GatherOptions opts) {
  const bool root = rank() == opts.root;
  return submit(collective("gather", opts.timeout, input), [=](MPI_Comm c, MPI_Request* r) {
    MPI_Datatype t = mpi_dtype(input.dtype);
    void* recv = root ? output.data : nullptr;
    return r ? MPI_Igather(input.data, n(input), t, recv, n(input), t, opts.root, c, r)
             : MPI_Gather(input.data, n(input), t, recv, n(input), t, opts.root, c);
  });
}

WorkPtr MpiProcessGroup::do_scatter(Buffer input, Buffer output, ScatterOptions opts) {
  const bool root = rank() == opts.root;
  return submit(collective("scatter", opts.timeout, output), [=](MPI_Comm c, MPI_Request* r) {
    MPI_Datatype t = mpi_dtype(output.dtype);
    const void* send = root ? input.data : nullptr;
    return r ? MPI_Iscatter(send, n(output), t, output.data, n(output), t, opts.root, c, r)
             : MPI_Scatter(send, n(output), t, output.data, n(output), t, opts.root, c);
  });
}

WorkPtr MpiProcessGroup::do_reduce_scatter(Buffer input, Buffer output, ReduceScatterOptions opts) {
  MpiRuntime* rt = &runtime_;
  const int world = size();
  return submit(
      collective("reduce_scatter", opts.timeout, output),
      [=](MPI_Comm c, MPI_Request* r) {
        const MPI_Datatype t = mpi_dtype(output.dtype);
        const MPI_Op o = mpi_op(*rt, output.dtype, opts.op);
        return r ? MPI_Ireduce_scatter_block(input.data, output.data, n(output), t, o, c, r)
                 : MPI_Reduce_scatter_block(input.data, output.data, n(output), t, o, c);
      },
      [=] {
        if (opts.op == ReduceOp::kAvg) finish_avg(output.data, output.count, output.dtype, world);
      });
}

WorkPtr MpiProcessGroup::do_all_to_all(Buffer input, Buffer output, AllToAllOptions opts) {
  const int per = static_cast<int>(input.count / static_cast<size_t>(size()));
  return submit(collective("all_to_all", opts.timeout, input), [=](MPI_Comm c, MPI_Request* r) {
    MPI_Datatype t = mpi_dtype(input.dtype);
    return r ? MPI_Ialltoall(input.data, per, t, output.data, per, t, c, r)
             : MPI_Alltoall(input.data, per, t, output.data, per, t, c);
  });
}

WorkPtr MpiProcessGroup::do_barrier(BarrierOptions opts) {
  return submit(collective("barrier", opts.timeout, std::nullopt),
                [](MPI_Comm c, MPI_Request* r) { return r ? MPI_Ibarrier(c, r) : MPI_Barrier(c); });
}

}  // namespace ddp::comm::mpi_backend
