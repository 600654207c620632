// The ops of MpiProcessGroup: argument checks on the calling thread, then one nonblocking MPI
// call each, started on the MPI thread (see mpi_process_group.h).
#include "comm/mpi/mpi_process_group.h"
#include "comm/mpi/mpi_types.h"
#include "comm/reduce_kernels.h"
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
    return MPI_Ibcast(buf.data, n(buf), mpi_dtype(buf.dtype), opts.root, c, r);
  });
}

WorkPtr MpiProcessGroup::all_reduce(Buffer buf, AllReduceOptions opts) {
  check_buffer("all_reduce", buf);
  check_reduce("all_reduce", buf, opts.op);
  MpiRuntime* rt = &runtime_;
  const int world = size();
  return submit("all_reduce", opts.timeout, buf.count == 0, [=](MPI_Comm c, MPI_Request* r) {
    return MPI_Iallreduce(MPI_IN_PLACE, buf.data, n(buf), mpi_dtype(buf.dtype), mpi_op(*rt, buf.dtype, opts.op), c, r);
  }, [=] { if (opts.op == ReduceOp::kAvg) finish_avg(buf.data, buf.count, buf.dtype, world); });
}

WorkPtr MpiProcessGroup::reduce(Buffer buf, ReduceOptions opts) {
  check_buffer("reduce", buf);
  check_peer("reduce", opts.root);
  check_reduce("reduce", buf, opts.op);
  MpiRuntime* rt = &runtime_;
  const bool root = rank() == opts.root;
  const int world = size();
  return submit("reduce", opts.timeout, buf.count == 0, [=](MPI_Comm c, MPI_Request* r) {
    return MPI_Ireduce(root ? MPI_IN_PLACE : buf.data, root ? buf.data : nullptr, n(buf), mpi_dtype(buf.dtype),
                       mpi_op(*rt, buf.dtype, opts.op), opts.root, c, r);
  }, [=] { if (root && opts.op == ReduceOp::kAvg) finish_avg(buf.data, buf.count, buf.dtype, world); });
}

WorkPtr MpiProcessGroup::all_gather(Buffer input, Buffer output, AllGatherOptions opts) {
  check_buffer("all_gather", input);
  check_buffer("all_gather", output);
  check_sizes("all_gather", input, output);
  return submit("all_gather", opts.timeout, input.count == 0, [=](MPI_Comm c, MPI_Request* r) {
    MPI_Datatype t = mpi_dtype(input.dtype);
    return MPI_Iallgather(input.data, n(input), t, output.data, n(input), t, c, r);
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
    return MPI_Igather(input.data, n(input), t, root ? output.data : nullptr, n(input), t, opts.root, c, r);
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
    return MPI_Iscatter(root ? input.data : nullptr, n(output), t, output.data, n(output), t, opts.root, c, r);
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
    return MPI_Ireduce_scatter_block(input.data, output.data, n(output), mpi_dtype(output.dtype),
                                     mpi_op(*rt, output.dtype, opts.op), c, r);
  }, [=] { if (opts.op == ReduceOp::kAvg) finish_avg(output.data, output.count, output.dtype, world); });
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
    return MPI_Ialltoall(input.data, per, t, output.data, per, t, c, r);
  });
}

WorkPtr MpiProcessGroup::barrier(BarrierOptions opts) {
  return submit("barrier", opts.timeout, false, [](MPI_Comm c, MPI_Request* r) { return MPI_Ibarrier(c, r); });
}

}  // namespace ddp::comm::mpi_backend
