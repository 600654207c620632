// The ops of MpiProcessGroup: argument checks on the calling thread, then one MPI call each on
// the MPI thread (see mpi_process_group.h): a collective's start makes the nonblocking call
// when given a request, the blocking one when given none (mpi_runtime.h says which runs).
#include "comm/mpi/mpi_process_group.h"
#include "comm/mpi/mpi_types.h"
#include "common/error.h"

namespace ddp::comm::mpi_backend {
namespace {
int n(const Buffer& b) { return static_cast<int>(b.count); }
}  // namespace

WorkPtr MpiProcessGroup::send(Buffer buf, int dst, SendOptions opts) {
  check_buffer("send", buf);
  check_peer("send", dst);
  const int tag = mpi_tag("send", opts.tag);
  return submit("send", opts.timeout, buf.count == 0, [=](MPI_Comm c, MPI_Request* r) {
    return MPI_Isend(buf.data, n(buf), mpi_dtype(buf.dtype), dst, tag, c, r);
  }, {}, detail::str(" to rank ", dst, " (tag ", opts.tag, ")"), true);
}

WorkPtr MpiProcessGroup::recv(Buffer buf, int src, RecvOptions opts) {
  check_buffer("recv", buf);
  check_peer("recv", src);
  const int tag = mpi_tag("recv", opts.tag);
  return submit("recv", opts.timeout, buf.count == 0, [=](MPI_Comm c, MPI_Request* r) {
    return MPI_Irecv(buf.data, n(buf), mpi_dtype(buf.dtype), src, tag, c, r);
  }, {}, detail::str(" from rank ", src, " (tag ", opts.tag, ")"), true);
}

WorkPtr MpiProcessGroup::broadcast(Buffer buf, BroadcastOptions opts) {
  check_buffer("broadcast", buf);
  check_peer("broadcast", opts.root);
  return submit("broadcast", opts.timeout, buf.count == 0, [=](MPI_Comm c, MPI_Request* r) {
    const MPI_Datatype t = mpi_dtype(buf.dtype);
    return r ? MPI_Ibcast(buf.data, n(buf), t, opts.root, c, r) : MPI_Bcast(buf.data, n(buf), t, opts.root, c);
  });
}

WorkPtr MpiProcessGroup::all_reduce(Buffer buf, AllReduceOptions opts) {
  check_buffer("all_reduce", buf);
  check_reduce("all_reduce", buf, opts.op);
  MpiRuntime* rt = &runtime_;
  const int world = size();
  return submit("all_reduce", opts.timeout, buf.count == 0, [=](MPI_Comm c, MPI_Request* r) {
    const MPI_Datatype t = mpi_dtype(buf.dtype);
    const MPI_Op o = mpi_op(*rt, buf.dtype, opts.op);
    return r ? MPI_Iallreduce(MPI_IN_PLACE, buf.data, n(buf), t, o, c, r)
             : MPI_Allreduce(MPI_IN_PLACE, buf.data, n(buf), t, o, c);
  }, [=] { if (opts.op == ReduceOp::kAvg) divide_by(buf, world); });
}

WorkPtr MpiProcessGroup::reduce(Buffer buf, ReduceOptions opts) {
  check_buffer("reduce", buf);
  check_peer("reduce", opts.root);
  check_reduce("reduce", buf, opts.op);
  MpiRuntime* rt = &runtime_;
  const bool root = rank() == opts.root;
  const int world = size();
  return submit("reduce", opts.timeout, buf.count == 0, [=](MPI_Comm c, MPI_Request* r) {
    const void* send = root ? MPI_IN_PLACE : buf.data;
    void* recv = root ? buf.data : nullptr;
    const MPI_Datatype t = mpi_dtype(buf.dtype);
    const MPI_Op o = mpi_op(*rt, buf.dtype, opts.op);
    return r ? MPI_Ireduce(send, recv, n(buf), t, o, opts.root, c, r) : MPI_Reduce(send, recv, n(buf), t, o, opts.root, c);
  }, [=] { if (root && opts.op == ReduceOp::kAvg) divide_by(buf, world); });
}

WorkPtr MpiProcessGroup::all_gather(Buffer input, Buffer output, AllGatherOptions opts) {
  check_buffer("all_gather", input);
  check_buffer("all_gather", output);
  check_sizes("all_gather", input, output);
  return submit("all_gather", opts.timeout, input.count == 0, [=](MPI_Comm c, MPI_Request* r) {
    MPI_Datatype t = mpi_dtype(input.dtype);
    return r ? MPI_Iallgather(input.data, n(input), t, output.data, n(input), t, c, r)
             : MPI_Allgather(input.data, n(input), t, output.data, n(input), t, c);
  });
}

WorkPtr MpiProcessGroup::gather(Buffer input, Buffer output, GatherOptions opts) {
  check_buffer("gather", input);
  check_peer("gather", opts.root);
  const bool root = rank() == opts.root;
  if (root) {
    check_buffer("gather", output);
    check_sizes("gather", input, output);
  }
  return submit("gather", opts.timeout, input.count == 0, [=](MPI_Comm c, MPI_Request* r) {
    MPI_Datatype t = mpi_dtype(input.dtype);
    void* recv = root ? output.data : nullptr;
    return r ? MPI_Igather(input.data, n(input), t, recv, n(input), t, opts.root, c, r)
             : MPI_Gather(input.data, n(input), t, recv, n(input), t, opts.root, c);
  });
}

WorkPtr MpiProcessGroup::scatter(Buffer input, Buffer output, ScatterOptions opts) {
  check_buffer("scatter", output);
  check_peer("scatter", opts.root);
  const bool root = rank() == opts.root;
  if (root) {
    check_buffer("scatter", input);
    check_sizes("scatter", output, input);
  }
  return submit("scatter", opts.timeout, output.count == 0, [=](MPI_Comm c, MPI_Request* r) {
    MPI_Datatype t = mpi_dtype(output.dtype);
    const void* send = root ? input.data : nullptr;
    return r ? MPI_Iscatter(send, n(output), t, output.data, n(output), t, opts.root, c, r)
             : MPI_Scatter(send, n(output), t, output.data, n(output), t, opts.root, c);
  });
}

WorkPtr MpiProcessGroup::reduce_scatter(Buffer input, Buffer output, ReduceScatterOptions opts) {
  check_buffer("reduce_scatter", input);
  check_buffer("reduce_scatter", output);
  check_reduce("reduce_scatter", input, opts.op);
  check_sizes("reduce_scatter", output, input);
  MpiRuntime* rt = &runtime_;
  const int world = size();
  return submit("reduce_scatter", opts.timeout, output.count == 0, [=](MPI_Comm c, MPI_Request* r) {
    const MPI_Datatype t = mpi_dtype(output.dtype);
    const MPI_Op o = mpi_op(*rt, output.dtype, opts.op);
    return r ? MPI_Ireduce_scatter_block(input.data, output.data, n(output), t, o, c, r)
             : MPI_Reduce_scatter_block(input.data, output.data, n(output), t, o, c);
  }, [=] { if (opts.op == ReduceOp::kAvg) divide_by(output, world); });
}

WorkPtr MpiProcessGroup::all_to_all(Buffer input, Buffer output, AllToAllOptions opts) {
  check_buffer("all_to_all", input);
  check_buffer("all_to_all", output);
  check_same("all_to_all", input, output);
  if (input.count % static_cast<size_t>(size()) != 0) {
    DDP_THROW(InvalidArgument, "all_to_all: ", input.count, " elements do not split evenly over ", size(), " ranks");
  }
  const int per = static_cast<int>(input.count / static_cast<size_t>(size()));
  return submit("all_to_all", opts.timeout, input.count == 0, [=](MPI_Comm c, MPI_Request* r) {
    MPI_Datatype t = mpi_dtype(input.dtype);
    return r ? MPI_Ialltoall(input.data, per, t, output.data, per, t, c, r)
             : MPI_Alltoall(input.data, per, t, output.data, per, t, c);
  });
}

WorkPtr MpiProcessGroup::barrier(BarrierOptions opts) {
  return submit("barrier", opts.timeout, false, [](MPI_Comm c, MPI_Request* r) {
    return r ? MPI_Ibarrier(c, r) : MPI_Barrier(c);
  });
}

}  // namespace ddp::comm::mpi_backend
