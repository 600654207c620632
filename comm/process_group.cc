#include "comm/process_group.h"

#include "comm/multi_buffer.h"
#include "common/deadline.h"
#include "common/error.h"

namespace ddp::comm {
namespace {
constexpr int kMonitoredBarrierTag = -1;  // negative tags are reserved for the library
}

ProcessGroup::ProcessGroup(int rank, int size, Options options)
    : rank_(rank), size_(size), options_(options) {
  DDP_CHECK(size >= 1, "world size must be at least 1, got ", size);
  DDP_CHECK(rank >= 0 && rank < size, "rank ", rank, " is outside [0, ", size, ")");
}

std::shared_ptr<GroupMemory> ProcessGroup::allocate(size_t bytes) { return host_memory(bytes); }

void ProcessGroup::abort(const std::string& reason) {
  if (aborted_.exchange(true, std::memory_order_acq_rel)) return;
  do_abort(reason);
}

// ---- the ops: validate, resolve, hand over ----

WorkPtr ProcessGroup::send(Buffer buf, int dst, SendOptions opts) {
  check_p2p("send", buf, dst);
  opts.timeout = resolve(opts.timeout);
  return do_send(buf, dst, opts);
}

WorkPtr ProcessGroup::recv(Buffer buf, int src, RecvOptions opts) {
  check_p2p("recv", buf, src);
  opts.timeout = resolve(opts.timeout);
  return do_recv(buf, src, opts);
}

WorkPtr ProcessGroup::recv_any(Buffer buf, std::shared_ptr<int> source, RecvOptions opts) {
  if (size_ < 2) DDP_THROW(InvalidArgument, "recv_any: no other rank in a group of ", size_);
  if (!source) DDP_THROW(InvalidArgument, "recv_any: no place for the source rank");
  check_buffer("recv_any", buf);
  opts.timeout = resolve(opts.timeout);
  return do_recv_any(buf, std::move(source), opts);
}

WorkPtr ProcessGroup::do_recv_any(Buffer, std::shared_ptr<int>, RecvOptions) {
  DDP_THROW(InvalidArgument, "recv_any: the ", backend_name(), " backend has no receive from any source");
}

WorkPtr ProcessGroup::broadcast(Buffer buf, BroadcastOptions opts) {
  check_peer("broadcast", opts.root);
  check_buffer("broadcast", buf);
  opts.timeout = resolve(opts.timeout);
  return do_broadcast(buf, opts);
}

WorkPtr ProcessGroup::all_reduce(Buffer buf, AllReduceOptions opts) {
  check_buffer("all_reduce", buf);
  check_reduce("all_reduce", buf, opts.op);
  opts.timeout = resolve(opts.timeout);
  return do_all_reduce(buf, opts);
}

WorkPtr ProcessGroup::reduce(Buffer buf, ReduceOptions opts) {
  check_peer("reduce", opts.root);
  check_buffer("reduce", buf);
  check_reduce("reduce", buf, opts.op);
  opts.timeout = resolve(opts.timeout);
  return do_reduce(buf, opts);
}

WorkPtr ProcessGroup::all_gather(Buffer input, Buffer output, AllGatherOptions opts) {
  check_buffer("all_gather", input);
  check_buffer("all_gather", output);
  check_sizes("all_gather", input, output);
  opts.timeout = resolve(opts.timeout);
  return do_all_gather(input, output, opts);
}

WorkPtr ProcessGroup::gather(Buffer input, Buffer output, GatherOptions opts) {
  check_rooted("gather", opts.root, input, output);
  opts.timeout = resolve(opts.timeout);
  return do_gather(input, output, opts);
}

WorkPtr ProcessGroup::scatter(Buffer input, Buffer output, ScatterOptions opts) {
  check_rooted("scatter", opts.root, output, input);
  opts.timeout = resolve(opts.timeout);
  return do_scatter(input, output, opts);
}

WorkPtr ProcessGroup::reduce_scatter(Buffer input, Buffer output, ReduceScatterOptions opts) {
  check_buffer("reduce_scatter", input);
  check_buffer("reduce_scatter", output);
  check_reduce("reduce_scatter", input, opts.op);
  check_sizes("reduce_scatter", output, input);
  opts.timeout = resolve(opts.timeout);
  return do_reduce_scatter(input, output, opts);
}

WorkPtr ProcessGroup::all_to_all(Buffer input, Buffer output, AllToAllOptions opts) {
  check_buffer("all_to_all", input);
  check_buffer("all_to_all", output);
  check_same("all_to_all", input, output);
  check_split("all_to_all", input);
  opts.timeout = resolve(opts.timeout);
  return do_all_to_all(input, output, opts);
}

WorkPtr ProcessGroup::barrier(BarrierOptions opts) {
  opts.timeout = resolve(opts.timeout);
  return do_barrier(opts);
}

// ---- multi-buffer ops: validate locally, resolve, hand over (agreement across ranks is the
// backend's first step: comm/multi_buffer.h) ----

WorkPtr ProcessGroup::all_reduce_multi(std::span<const Buffer> buffers, AllReduceOptions opts) {
  check_list("all_reduce_multi", buffers);
  check_reduce("all_reduce_multi", buffers[0], opts.op);
  opts.timeout = resolve(opts.timeout);
  return do_all_reduce_multi(buffers, opts);
}

WorkPtr ProcessGroup::broadcast_multi(std::span<const Buffer> buffers, BroadcastMultiOptions opts) {
  check_rooted_list("broadcast_multi", opts.root, opts.root_index, buffers);
  opts.timeout = resolve(opts.timeout);
  return do_broadcast_multi(buffers, opts);
}

WorkPtr ProcessGroup::reduce_multi(std::span<const Buffer> buffers, ReduceMultiOptions opts) {
  check_rooted_list("reduce_multi", opts.root, opts.root_index, buffers);
  check_reduce("reduce_multi", buffers[0], opts.op);
  opts.timeout = resolve(opts.timeout);
  return do_reduce_multi(buffers, opts);
}

WorkPtr ProcessGroup::all_gather_multi(std::span<const Buffer> inputs, std::span<const Buffer> outputs,
                                       AllGatherOptions opts) {
  check_list("all_gather_multi (inputs)", inputs);
  check_list("all_gather_multi (outputs)", outputs);
  if (inputs.size() != outputs.size()) {
    DDP_THROW(InvalidArgument, "all_gather_multi: ", inputs.size(), " inputs but ", outputs.size(),
              " outputs (one output per input)");
  }
  const Buffer all{nullptr, inputs[0].count * inputs.size(), inputs[0].dtype, inputs[0].device};
  check_sizes("all_gather_multi", all, outputs[0]);
  for (const Buffer& in : inputs) {
    for (const Buffer& out : outputs) {
      if (overlap(in, out)) DDP_THROW(InvalidArgument, "all_gather_multi: an input overlaps an output");
    }
  }
  opts.timeout = resolve(opts.timeout);
  return do_all_gather_multi(inputs, outputs, opts);
}

WorkPtr ProcessGroup::do_all_reduce_multi(std::span<const Buffer> buffers, AllReduceOptions opts) {
  return multi::all_reduce(*this, buffers, opts);
}

WorkPtr ProcessGroup::do_broadcast_multi(std::span<const Buffer> buffers, BroadcastMultiOptions opts) {
  return multi::broadcast(*this, buffers, opts);
}

WorkPtr ProcessGroup::do_reduce_multi(std::span<const Buffer> buffers, ReduceMultiOptions opts) {
  return multi::reduce(*this, buffers, opts);
}

WorkPtr ProcessGroup::do_all_gather_multi(std::span<const Buffer> inputs, std::span<const Buffer> outputs,
                                          AllGatherOptions opts) {
  return multi::all_gather(*this, inputs, outputs, opts);
}

// ---- checks ----

void ProcessGroup::check_device(const char* op, const Buffer& b) const {
  if (b.device != buffer_device()) {
    DDP_THROW(InvalidArgument, backend_name(), " ", op, ": buffer is on ", b.device.str(), "; the ",
              backend_name(), " backend takes buffers on ", buffer_device().str(),
              buffer_device().is_cuda() ? " (use gloo or tcp for host memory)"
                                        : " (use nccl, or tcp with CUDA staging, for device memory)");
  }
}

void ProcessGroup::check_list_devices(const char* op, std::span<const Buffer> list) const {
  for (const Buffer& b : list) check_device(op, b);
}

void ProcessGroup::check_buffer(const char* op, const Buffer& b) const {
  check_device(op, b);
  check_not_null(op, b);
}

void ProcessGroup::check_not_null(const char* op, const Buffer& b) const {
  if (b.count > 0 && b.data == nullptr) DDP_THROW(InvalidArgument, op, ": null buffer with count ", b.count);
}

void ProcessGroup::check_peer(const char* op, int peer) const {
  if (peer < 0 || peer >= size_) {
    DDP_THROW(InvalidArgument, op, ": rank ", peer, " is outside the group [0, ", size_, ")");
  }
}

void ProcessGroup::check_p2p(const char* op, const Buffer& buf, int peer) const {
  check_peer(op, peer);
  if (peer == rank_) {
    DDP_THROW(InvalidArgument, op, ": rank ", peer, " is this rank (no send or recv to oneself)");
  }
  check_buffer(op, buf);
}

void ProcessGroup::check_rooted(const char* op, int root, const Buffer& each, const Buffer& at_root) const {
  check_peer(op, root);
  check_buffer(op, each);
  if (rank_ == root) {  // non-roots do not use theirs
    check_buffer(op, at_root);
    check_sizes(op, each, at_root);
  }
}

void ProcessGroup::check_reduce(const char* op, const Buffer& buf, ReduceOp rop) const {
  if (is_bitwise(rop) && !is_integer(buf.dtype)) {
    DDP_THROW(InvalidArgument, op, ": reduce op ", to_string(rop), " needs an integer dtype, got ",
              to_string(buf.dtype));
  }
}

void ProcessGroup::check_sizes(const char* op, const Buffer& small, const Buffer& large) const {
  if (small.dtype != large.dtype) {
    DDP_THROW(InvalidArgument, op, ": dtypes differ (", to_string(small.dtype), " vs ",
              to_string(large.dtype), ")");
  }
  if (large.count != small.count * static_cast<size_t>(size_)) {
    DDP_THROW(InvalidArgument, op, ": the large buffer must hold world_size (", size_, ") x ", small.count,
              " elements, got ", large.count);
  }
}

void ProcessGroup::check_same(const char* op, const Buffer& a, const Buffer& b) const {
  if (a.dtype != b.dtype || a.count != b.count) {
    DDP_THROW(InvalidArgument, op, ": input and output differ (", a.count, " x ", to_string(a.dtype), " vs ",
              b.count, " x ", to_string(b.dtype), ")");
  }
}

void ProcessGroup::check_split(const char* op, const Buffer& b) const {
  if (b.count % static_cast<size_t>(size_) != 0) {
    DDP_THROW(InvalidArgument, op, ": ", b.count, " elements do not split evenly over ", size_, " ranks");
  }
}

void ProcessGroup::check_list(const char* op, std::span<const Buffer> list) const {
  if (list.empty()) DDP_THROW(InvalidArgument, op, ": the buffer list is empty");
  check_list_devices(op, list);
  for (size_t i = 0; i < list.size(); ++i) {
    check_not_null(op, list[i]);
    if (list[i].dtype != list[0].dtype || list[i].count != list[0].count) {
      DDP_THROW(InvalidArgument, op, ": buffer ", i, " holds ", list[i].count, " x ",
                to_string(list[i].dtype), ", buffer 0 holds ", list[0].count, " x ", to_string(list[0].dtype),
                " (every buffer must match)");
    }
    for (size_t j = 0; j < i; ++j) {
      if (overlap(list[i], list[j])) DDP_THROW(InvalidArgument, op, ": buffers ", j, " and ", i, " overlap");
    }
  }
}

void ProcessGroup::check_rooted_list(const char* op, int root, int root_index,
                                     std::span<const Buffer> list) const {
  check_peer(op, root);
  check_list(op, list);
  if (root_index < 0 || static_cast<size_t>(root_index) >= list.size()) {
    DDP_THROW(InvalidArgument, op, ": root index ", root_index, " is outside the list [0, ", list.size(),
              ")");
  }
}

// ---- monitored_barrier ----

void ProcessGroup::monitored_barrier(Millis timeout) {
  Deadline deadline(resolve(timeout));
  uint8_t token = 1;
  if (size_ == 1) return;
  if (buffer_device().is_cuda()) {
    // Device-side p2p completes in issue order, so a late rank would hide which later ones
    // arrived; PyTorch offers monitored_barrier on gloo only, for the same reason.
    DDP_THROW(InvalidArgument, "monitored_barrier: not available on a ", backend_name(),
              " group (its buffers live on ", buffer_device().str(),
              "); run it on a host group over the same ranks: "
              "new_group(ranks, {.backend = \"tcp\"}) or \"gloo\"");
  }
  if (rank_ != 0) {
    send(view(&token, 1), 0, {kMonitoredBarrierTag, deadline.remaining()})->wait();
    recv(view(&token, 1), 0, {kMonitoredBarrierTag, deadline.remaining()})->wait();
    return;
  }
  std::vector<uint8_t> tokens(size_);
  std::vector<WorkPtr> works(size_);
  for (int r = 1; r < size_; ++r)
    works[r] = recv(view(&tokens[r], 1), r, {kMonitoredBarrierTag, deadline.remaining()});
  std::string missing;
  for (int r = 1; r < size_; ++r) {
    try {
      works[r]->wait(deadline.remaining());
    } catch (const Error&) {
      missing += (missing.empty() ? "" : ", ") + std::to_string(r);
    }
  }
  if (!missing.empty()) {
    DDP_THROW(TimeoutError, "monitored_barrier: ranks [", missing, "] did not arrive within ",
              resolve(timeout).count(), " ms");
  }
  std::vector<WorkPtr> acks;
  for (int r = 1; r < size_; ++r)
    acks.push_back(send(view(&token, 1), r, {kMonitoredBarrierTag, deadline.remaining()}));
  wait_all(acks);
}

}  // namespace ddp::comm
