#include "comm/tcp/tcp_process_group.h"

#include <cstring>

#include "comm/tcp/hierarchical_collectives.h"
#include "comm/tcp/shm_collectives.h"
#include "comm/tcp/socket_collectives.h"
#include "comm/tcp/socket_engine.h"
#include "common/error.h"

namespace ddp::comm::tcp {

const char* to_string(Transport t) {
  switch (t) {
    case Transport::kLocal: return "local";
    case Transport::kShm: return "shm";
    case Transport::kSocket: return "socket";
    case Transport::kHierarchical: return "hierarchical";
  }
  return "unknown";
}

TcpProcessGroup::TcpProcessGroup(const GroupSetup& setup)
    : ProcessGroup(setup.rank, setup.size, setup.options), group_(setup.name) {
  health_.init(setup.size);
}

std::shared_ptr<TcpProcessGroup> TcpProcessGroup::create(const GroupSetup& setup) {
  std::shared_ptr<TcpProcessGroup> pg(new TcpProcessGroup(setup));
  if (setup.size > 1) pg->connect(setup);
  pg->worker_ = std::thread([raw = pg.get()] { raw->worker_loop(); });
  return pg;
}

TcpProcessGroup::~TcpProcessGroup() { shutdown(); }

void TcpProcessGroup::shutdown() noexcept {
  health_.fail(FailureKind::kOther, -1, detail::str("the group '", group_, "' was destroyed"));
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
  }
  cv_.notify_all();
  if (engine_) engine_->shutdown();  // fails the socket waits of a running op
  if (worker_.joinable()) {
    if (worker_.get_id() == std::this_thread::get_id()) {
      worker_.detach();  // destroyed from a Work callback on the worker: it exits by itself
    } else {
      worker_.join();
    }
  }
}

// ---- validation and submission ----

void TcpProcessGroup::check_buffer(const char* op, const Buffer& b) const {
  if (b.device.is_cuda()) {
    DDP_THROW(InvalidArgument, op, ": the tcp backend takes host buffers, got ", b.device.str());
  }
  if (b.count > 0 && b.data == nullptr) DDP_THROW(InvalidArgument, op, ": null buffer with count ", b.count);
}

WorkPtr TcpProcessGroup::submit(OpDesc desc, const Buffer& in, const Buffer& out, Millis timeout) {
  const Millis limit = resolve(timeout);
  std::unique_lock<std::mutex> lock(mu_);
  desc.seq = next_seq_++;
  Task task;
  task.ctx.desc = desc;
  task.ctx.group = &group_;
  task.ctx.timeout = limit;
  task.in = in;
  task.out = out;
  if (inline_spin_us_ >= 0 && shm_ && queue_.empty() && !busy_ && shm_->resumable(desc, in) &&
      in.bytes() <= inline_max_bytes_) {
    busy_ = true;
    lock.unlock();
    // The inline attempt only polls, within its own budget: the op's deadline starts when
    // the worker takes over (a clock read saved on the fast path; the budget is microseconds
    // to milliseconds, timeouts are seconds).
    const bool finished = try_inline(task);
    lock.lock();
    busy_ = false;
    // Wake the worker only when it has something to do: a needless wake-up steals a core
    // from a peer rank on a small machine.
    const bool wake = !finished || !queue_.empty();
    if (!finished) {
      task.ctx.deadline = Deadline(limit);
      queue_.push_front(task);  // the worker completes it, before anything newer
    }
    lock.unlock();
    if (wake) cv_.notify_one();
    return task.work;
  }
  task.ctx.deadline = Deadline(limit);
  task.work = std::make_shared<Work>(detail::str(to_string(desc.kind), " (seq ", desc.seq, ") on group '", group_, "'"));
  WorkPtr work = task.work;
  queue_.push_back(std::move(task));
  lock.unlock();
  cv_.notify_one();
  return work;
}

// On the caller's thread, with busy_ held: true when the op ended (task.work finished).
bool TcpProcessGroup::try_inline(Task& task) {
  bool finished = false;
  std::exception_ptr error = guarded([&] {
    if (health_.broken()) health_.rethrow(task.ctx.label());
    finished = shm_->step(task.ctx, task.in, task.out, task.fast, false, inline_spin_us_);
  });
  if (!error && finished) {
    collectives_run_.fetch_add(1, std::memory_order_relaxed);
    task.work = inline_done_;
    return true;
  }
  if (error) {
    task.work = std::make_shared<Work>(task.ctx.label());
    task.work->finish(error);
    return true;
  }
  task.work = std::make_shared<Work>(task.ctx.label());
  return false;
}

WorkPtr TcpProcessGroup::post_p2p(bool is_send, Buffer buf, int peer, int tag, Millis timeout) {
  const char* op = is_send ? "send" : "recv";
  check_peer(op, peer);
  check_buffer(op, buf);
  if (peer == rank()) DDP_THROW(InvalidArgument, op, ": rank ", peer, " is this rank");
  uint64_t n;
  {
    std::lock_guard<std::mutex> lock(mu_);
    n = next_p2p_++;
  }
  std::string label = detail::str(op, is_send ? " to" : " from", " rank ", peer, " (tag ", tag, ", p2p #", n,
                                  ") on group '", group_, "'");
  if (buf.bytes() == 0) return Work::completed(label);
  auto work = std::make_shared<Work>(label);
  Deadline deadline(resolve(timeout));
  if (is_send) {
    engine_->send(peer, Channel::kUser, tag, buf.data, buf.bytes(), deadline, work, std::move(label));
  } else {
    engine_->recv(peer, Channel::kUser, tag, buf.data, buf.bytes(), deadline, work, std::move(label));
  }
  return work;
}

WorkPtr TcpProcessGroup::send(Buffer buf, int dst, SendOptions opts) {
  return post_p2p(true, buf, dst, opts.tag, opts.timeout);
}

WorkPtr TcpProcessGroup::recv(Buffer buf, int src, RecvOptions opts) {
  return post_p2p(false, buf, src, opts.tag, opts.timeout);
}

WorkPtr TcpProcessGroup::broadcast(Buffer buf, BroadcastOptions opts) {
  check_peer("broadcast", opts.root);
  check_buffer("broadcast", buf);
  if (buf.count == 0) return Work::completed("broadcast (empty)");
  return submit({OpKind::kBroadcast, buf.dtype, ReduceOp::kSum, opts.root, buf.count, 0}, buf, {}, opts.timeout);
}

WorkPtr TcpProcessGroup::all_reduce(Buffer buf, AllReduceOptions opts) {
  check_buffer("all_reduce", buf);
  check_reduce("all_reduce", buf, opts.op);
  if (buf.count == 0) return Work::completed("all_reduce (empty)");
  return submit({OpKind::kAllReduce, buf.dtype, opts.op, -1, buf.count, 0}, buf, {}, opts.timeout);
}

WorkPtr TcpProcessGroup::reduce(Buffer buf, ReduceOptions opts) {
  check_peer("reduce", opts.root);
  check_buffer("reduce", buf);
  check_reduce("reduce", buf, opts.op);
  if (buf.count == 0) return Work::completed("reduce (empty)");
  return submit({OpKind::kReduce, buf.dtype, opts.op, opts.root, buf.count, 0}, buf, {}, opts.timeout);
}

WorkPtr TcpProcessGroup::all_gather(Buffer input, Buffer output, AllGatherOptions opts) {
  check_buffer("all_gather", input);
  check_buffer("all_gather", output);
  check_sizes("all_gather", input, output);
  if (input.count == 0) return Work::completed("all_gather (empty)");
  return submit({OpKind::kAllGather, input.dtype, ReduceOp::kSum, -1, input.count, 0}, input, output, opts.timeout);
}

WorkPtr TcpProcessGroup::gather(Buffer input, Buffer output, GatherOptions opts) {
  check_peer("gather", opts.root);
  check_buffer("gather", input);
  check_buffer("gather", output);
  if (rank() == opts.root) check_sizes("gather", input, output);  // non-roots need no output
  if (input.count == 0) return Work::completed("gather (empty)");
  return submit({OpKind::kGather, input.dtype, ReduceOp::kSum, opts.root, input.count, 0}, input, output, opts.timeout);
}

WorkPtr TcpProcessGroup::scatter(Buffer input, Buffer output, ScatterOptions opts) {
  check_peer("scatter", opts.root);
  check_buffer("scatter", input);
  check_buffer("scatter", output);
  if (rank() == opts.root) check_sizes("scatter", output, input);  // non-roots need no input
  if (output.count == 0) return Work::completed("scatter (empty)");
  return submit({OpKind::kScatter, output.dtype, ReduceOp::kSum, opts.root, output.count, 0}, input, output,
                opts.timeout);
}

WorkPtr TcpProcessGroup::reduce_scatter(Buffer input, Buffer output, ReduceScatterOptions opts) {
  check_buffer("reduce_scatter", input);
  check_buffer("reduce_scatter", output);
  check_sizes("reduce_scatter", output, input);
  check_reduce("reduce_scatter", output, opts.op);
  if (output.count == 0) return Work::completed("reduce_scatter (empty)");
  return submit({OpKind::kReduceScatter, output.dtype, opts.op, -1, output.count, 0}, input, output, opts.timeout);
}

WorkPtr TcpProcessGroup::all_to_all(Buffer input, Buffer output, AllToAllOptions opts) {
  check_buffer("all_to_all", input);
  check_buffer("all_to_all", output);
  check_same("all_to_all", input, output);
  if (input.count % static_cast<size_t>(size()) != 0) {
    DDP_THROW(InvalidArgument, "all_to_all: ", input.count, " elements do not split evenly over ", size(), " ranks");
  }
  if (input.count == 0) return Work::completed("all_to_all (empty)");
  return submit({OpKind::kAllToAll, input.dtype, ReduceOp::kSum, -1, input.count, 0}, input, output, opts.timeout);
}

WorkPtr TcpProcessGroup::barrier(BarrierOptions opts) {
  return submit({OpKind::kBarrier, DType::kUInt8, ReduceOp::kSum, -1, 0, 0}, {}, {}, opts.timeout);
}

// ---- execution ----

void TcpProcessGroup::worker_loop() {
  std::unique_lock<std::mutex> lock(mu_);
  while (true) {
    cv_.wait(lock, [&] { return (stopping_ && !busy_) || (!queue_.empty() && !busy_); });
    if (queue_.empty()) return;
    Task task = std::move(queue_.front());
    queue_.pop_front();
    busy_ = true;
    lock.unlock();
    execute(task);
    lock.lock();
    busy_ = false;
  }
}

// Any failure of a collective breaks the group (the ranks' sequence numbers no longer agree).
template <typename F>
std::exception_ptr TcpProcessGroup::guarded(F&& f) {
  try {
    f();
    return nullptr;
  } catch (const TimeoutError& e) {
    health_.fail(FailureKind::kTimeout, -1, e.message());
    return std::current_exception();
  } catch (const InvalidArgument& e) {
    health_.fail(FailureKind::kMismatch, -1, e.message());
    return std::current_exception();
  } catch (const Error& e) {
    health_.fail(FailureKind::kOther, -1, e.message());
    return std::current_exception();
  } catch (const std::exception& e) {
    health_.fail(FailureKind::kOther, -1, e.what());
    return std::current_exception();
  }
}

void TcpProcessGroup::execute(Task& task) {
  std::exception_ptr error = guarded([&] {
    if (health_.broken()) health_.rethrow(task.ctx.label());
    if (transport_ == Transport::kLocal) {
      run_local(task);
    } else if (task.fast.stage > 0) {
      shm_->step(task.ctx, task.in, task.out, task.fast, true, 0);
    } else if (shm_) {
      shm_->run(task.ctx, task.in, task.out);
    } else if (hierarchy_) {
      hierarchy_->run(task.ctx, task.in, task.out);
    } else {
      sockets_->run(task.ctx, task.in, task.out);
    }
  });
  if (!error) collectives_run_.fetch_add(1);
  task.work->finish(error);
}

// World size 1: every collective is a copy at most.
void TcpProcessGroup::run_local(const Task& task) {
  const Buffer& in = task.in;
  const Buffer& out = task.out;
  switch (task.ctx.desc.kind) {
    case OpKind::kAllGather:
    case OpKind::kGather:
    case OpKind::kScatter:
    case OpKind::kReduceScatter:
    case OpKind::kAllToAll:
      if (in.data != out.data && out.bytes() > 0) std::memmove(out.data, in.data, out.bytes());
      break;
    default: break;
  }
}

}  // namespace ddp::comm::tcp
