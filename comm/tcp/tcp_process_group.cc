#include "comm/tcp/tcp_process_group.h"

#include <cstring>

#include "comm/tcp/hierarchical_collectives.h"
#include "comm/tcp/shm_collectives.h"
#include "comm/tcp/shm_region.h"
#include "comm/tcp/socket_collectives.h"
#include "comm/tcp/socket_engine.h"
#include "common/error.h"
#include "common/log.h"

namespace ddp::comm::tcp {
namespace {

using Micros = std::chrono::microseconds;

// A collective's Work: counts the threads blocked on it into the group's counter, and polls
// for completion for the group's budget before it sleeps.
class CollectiveWork final : public Work {
 public:
  CollectiveWork(std::string label, std::shared_ptr<std::atomic<int>> blocked, Micros poll)
      : Work(std::move(label)), blocked_(std::move(blocked)), poll_(poll) {}

 protected:
  void blocking(bool begin) noexcept override {
    blocked_->fetch_add(begin ? 1 : -1, std::memory_order_relaxed);
  }
  Micros poll_before_sleep() const noexcept override { return poll_; }

 private:
  std::shared_ptr<std::atomic<int>> blocked_;
  Micros poll_;
};

}  // namespace

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
    : ProcessGroup(setup.rank, setup.size, setup.options), group_(setup.name), store_(setup.store) {
  health_.init(setup.size);
}

namespace {

class RegionMemory final : public GroupMemory {
 public:
  explicit RegionMemory(std::shared_ptr<ShmRegion> region)
      : GroupMemory(region->mine(), region->bytes(), true), region_(std::move(region)) {}

 private:
  std::shared_ptr<ShmRegion> region_;
};

}  // namespace

uint64_t TcpProcessGroup::direct_ops() const {
  if (hierarchy_) return static_cast<const TcpProcessGroup&>(*hierarchy_->local()).direct_ops();
  return shm_ ? shm_->direct_runs() : 0;
}

uint64_t TcpProcessGroup::cross_memory_ops() const { return shm_ ? shm_->cross_runs() : 0; }

size_t TcpProcessGroup::hierarchy_small_bytes() const { return hierarchy_ ? hierarchy_->small_bytes() : 0; }

bool TcpProcessGroup::cross_memory() const { return shm_ && shm_->cross_reachable(); }

namespace {

std::string large_way_text(const std::vector<LargeWay>& ways) {
  auto text = [](LargeWay w) {
    switch (w) {
      case LargeWay::kFlat: return "flat over the group's sockets";
      case LargeWay::kOverlapped: return "split, its steps within and across hosts overlapped";
      case LargeWay::kSplit: break;
    }
    return "split, its steps in turn";
  };
  std::string all;
  for (LargeWay w : ways) all += detail::str(all.empty() ? "" : "; or ", text(w));
  if (ways.size() == 1) return all;
  return detail::str(all, "; whichever is measured faster while it runs (the first until then)");
}

}  // namespace

std::string TcpProcessGroup::choices() const {
  switch (transport_) {
    case Transport::kLocal: return "tcp: one rank";
    case Transport::kShm:
      return detail::str("tcp: shared memory (cross-memory attach: ",
                         cross_memory() ? "every peer reachable" : "off or out of reach", ")");
    case Transport::kSocket:
      return detail::str("tcp: sockets, ", socket_streams(), " connection(s) to each peer");
    case Transport::kHierarchical:
      return detail::str(
          "tcp: hierarchical; an all_reduce goes whole within the host, then across, up to ",
          hierarchy_small_bytes(), " bytes (DDP_TCP_HIERARCHY_SMALL_BYTES; measured unless set); above, ",
          large_way_text(hierarchy_->large_ways()), " (DDP_TCP_HIERARCHY_LARGE, DDP_TCP_HIERARCHY_OVERLAP)");
  }
  return "tcp";
}

std::shared_ptr<GroupMemory> TcpProcessGroup::allocate(size_t bytes) {
  if (hierarchy_) {  // every rank calls it, so every rank of each host calls its host's group
    auto memory = hierarchy_->local()->allocate(bytes);
    logger("tcp")->debug("group '{}' (hierarchical): {} bytes of group memory from its host's group, {}",
                         group_, bytes, memory->shared() ? "shared" : "plain");
    return memory;
  }
  if (transport_ != Transport::kShm || bytes == 0) return ProcessGroup::allocate(bytes);
  ShmRegion::Setup s;
  s.store = store_.get();
  s.rank = rank();
  s.world = size();
  s.id = regions_made_.fetch_add(1);
  s.bytes = bytes;
  s.timeout = timeout();
  std::shared_ptr<ShmRegion> region;
  try {
    region = ShmRegion::create(s);
  } catch (const BackendError& e) {
    // Some rank's /dev/shm had no room (every rank sees it: ShmRegion): plain memory, which
    // every op takes as well, only not in place.
    if (!warned_memory_.exchange(true)) {
      logger("tcp")->warn("{}: group '{}' gives plain host memory instead (nothing in place; said once)",
                          e.what(), group_);
    }
    return ProcessGroup::allocate(bytes);
  }
  shm_->add_region(region);
  return std::make_shared<RegionMemory>(std::move(region));
}

std::shared_ptr<TcpProcessGroup> TcpProcessGroup::create(const GroupSetup& setup, CreateOptions options) {
  std::shared_ptr<TcpProcessGroup> pg(new TcpProcessGroup(setup));
  pg->on_caller_ = options.on_caller;
  if (setup.size > 1) pg->connect(setup, options.ranks_on_host);
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
  for (auto& engine : engines_) engine->shutdown();  // fails the socket waits of a running op
  if (worker_.joinable()) {
    if (worker_.get_id() == std::this_thread::get_id()) {
      worker_.detach();  // destroyed from a Work callback on the worker: it exits by itself
    } else {
      worker_.join();
    }
  }
}

// ---- submission (arguments were validated by ProcessGroup) ----

WorkPtr TcpProcessGroup::submit(OpDesc desc, const Buffer& in, const Buffer& out, Millis timeout) {
  return submit(desc, in, out, timeout, on_caller_ ? kToTheEnd : inline_spin_us_);
}

WorkPtr TcpProcessGroup::all_reduce_within(const Buffer& buf, ReduceOp op, Millis timeout, int inline_us) {
  if (buf.count == 0) return Work::completed("all_reduce (empty)");
  return submit({OpKind::kAllReduce, buf.dtype, op, -1, buf.count, 0}, buf, {}, timeout, inline_us);
}

WorkPtr TcpProcessGroup::submit(OpDesc desc, const Buffer& in, const Buffer& out, Millis timeout,
                                int inline_us) {
  std::unique_lock<std::mutex> lock(mu_);
  desc.seq = next_seq_++;
  Task task;
  task.ctx.desc = desc;
  task.ctx.group = &group_;
  task.ctx.timeout = timeout;
  task.in = in;
  task.out = out;
  if (inline_us == kToTheEnd && queue_.empty() && !busy_) return run_on_caller(task, lock);
  if (inline_us >= 0 && queue_.empty() && !busy_ && inline_fits(desc, in)) {
    busy_ = true;
    lock.unlock();
    // The inline attempt only polls, within its own budget: the op's deadline starts when
    // the worker takes over (a clock read saved on the fast path; the budget is microseconds
    // to milliseconds, timeouts are seconds).
    const bool finished = try_inline(task, inline_us);
    lock.lock();
    busy_ = false;
    // Wake the worker only when it has something to do: a needless wake-up steals a core
    // from a peer rank on a small machine.
    const bool wake = !finished || !queue_.empty();
    if (!finished) {
      task.ctx.deadline = Deadline(timeout);
      queue_.push_front(task);  // the worker completes it, before anything newer
    }
    lock.unlock();
    if (wake) cv_.notify_one();
    return task.work;
  }
  task.ctx.deadline = Deadline(timeout);
  // Over sockets a wait polls as a wait for a message that size would; shm ops sleep at once
  // (they mostly finish on the caller's thread).
  const auto poll = sockets_ ? sockets_->poll_for(std::max(in.bytes(), out.bytes())) : Micros{0};
  task.work = std::make_shared<CollectiveWork>(
      detail::str(to_string(desc.kind), " (seq ", desc.seq, ") on group '", group_, "'"), blocked_, poll);
  WorkPtr work = task.work;
  queue_.push_back(std::move(task));
  lock.unlock();
  cv_.notify_one();
  return work;
}

// create(setup, true): the op runs to its end here, as the worker would run it; the caller
// counts as blocked on it meanwhile (the waits it makes poll as for a blocked thread).
WorkPtr TcpProcessGroup::run_on_caller(Task& task, std::unique_lock<std::mutex>& lock) {
  busy_ = true;
  lock.unlock();
  task.ctx.deadline = Deadline(task.ctx.timeout);
  task.work = std::make_shared<CollectiveWork>(task.ctx.label(), blocked_, Micros{0});
  blocked_->fetch_add(1, std::memory_order_relaxed);
  execute(task);
  blocked_->fetch_sub(1, std::memory_order_relaxed);
  lock.lock();
  busy_ = false;
  const bool wake = !queue_.empty() || stopping_;
  lock.unlock();
  if (wake) cv_.notify_one();
  return task.work;
}

// On the caller's thread, with busy_ held: true when the op ended (task.work finished).
bool TcpProcessGroup::inline_fits(const OpDesc& desc, const Buffer& in) const {
  if (shm_) return shm_->resumable(desc, in) && in.bytes() <= inline_max_bytes_;
  if (hierarchy_) return hierarchy_->starts_here(desc, in);
  return sockets_ && sockets_->resumable(desc, in);
}

bool TcpProcessGroup::try_inline(Task& task, int inline_us) {
  bool finished = false;
  std::exception_ptr error = guarded([&] {
    if (health_.broken()) health_.rethrow(task.ctx.label());
    task.started = true;
    if (shm_) {
      finished = shm_->start(task.ctx, task.in, task.out, inline_us);
    } else if (hierarchy_) {
      task.ctx.deadline = Deadline(task.ctx.timeout);  // its child ops get what is left of it
      finished = hierarchy_->start(task.ctx, task.in, inline_us, task.step);
    } else {
      task.ctx.deadline = Deadline(task.ctx.timeout);  // its messages carry it from the start
      finished = sockets_->start(task.ctx, task.in, Micros(inline_us));
    }
  });
  if (!error && finished) {
    collectives_run_.fetch_add(1, std::memory_order_relaxed);
    task.work = inline_done_;
    return true;
  }
  if (error) {
    task.work = std::make_shared<CollectiveWork>(task.ctx.label(), blocked_, Micros{0});
    task.work->finish(error);
    return true;
  }
  task.work = std::make_shared<CollectiveWork>(task.ctx.label(), blocked_, Micros{0});
  return false;
}

WorkPtr TcpProcessGroup::post_p2p(bool is_send, Buffer buf, int peer, int tag, Millis timeout) {
  const char* op = is_send ? "send" : "recv";
  uint64_t n;
  {
    std::lock_guard<std::mutex> lock(mu_);
    n = next_p2p_++;
  }
  std::string label = detail::str(op, is_send ? " to" : " from", " rank ", peer, " (tag ", tag, ", p2p #", n,
                                  ") on group '", group_, "'");
  if (buf.bytes() == 0) return Work::completed(label);
  auto work = std::make_shared<Work>(label);
  Deadline deadline(timeout);
  if (is_send) {
    engines_[0]->send(peer, Channel::kUser, tag, buf.data, buf.bytes(), deadline, work, std::move(label));
  } else {
    engines_[0]->recv(peer, Channel::kUser, tag, buf.data, buf.bytes(), deadline, work, std::move(label));
  }
  return work;
}

WorkPtr TcpProcessGroup::do_send(Buffer buf, int dst, SendOptions opts) {
  return post_p2p(true, buf, dst, opts.tag, opts.timeout);
}

WorkPtr TcpProcessGroup::do_recv(Buffer buf, int src, RecvOptions opts) {
  return post_p2p(false, buf, src, opts.tag, opts.timeout);
}

WorkPtr TcpProcessGroup::do_broadcast(Buffer buf, BroadcastOptions opts) {
  if (buf.count == 0) return Work::completed("broadcast (empty)");
  return submit({OpKind::kBroadcast, buf.dtype, ReduceOp::kSum, opts.root, buf.count, 0}, buf, {},
                opts.timeout);
}

WorkPtr TcpProcessGroup::do_all_reduce(Buffer buf, AllReduceOptions opts) {
  if (buf.count == 0) return Work::completed("all_reduce (empty)");
  return submit({OpKind::kAllReduce, buf.dtype, opts.op, -1, buf.count, 0}, buf, {}, opts.timeout);
}

WorkPtr TcpProcessGroup::do_reduce(Buffer buf, ReduceOptions opts) {
  if (buf.count == 0) return Work::completed("reduce (empty)");
  return submit({OpKind::kReduce, buf.dtype, opts.op, opts.root, buf.count, 0}, buf, {}, opts.timeout);
}

WorkPtr TcpProcessGroup::do_all_gather(Buffer input, Buffer output, AllGatherOptions opts) {
  if (input.count == 0) return Work::completed("all_gather (empty)");
  return submit({OpKind::kAllGather, input.dtype, ReduceOp::kSum, -1, input.count, 0}, input, output,
                opts.timeout);
}

WorkPtr TcpProcessGroup::do_gather(Buffer input, Buffer output, GatherOptions opts) {
  if (input.count == 0) return Work::completed("gather (empty)");
  return submit({OpKind::kGather, input.dtype, ReduceOp::kSum, opts.root, input.count, 0}, input, output,
                opts.timeout);
}

WorkPtr TcpProcessGroup::do_scatter(Buffer input, Buffer output, ScatterOptions opts) {
  if (output.count == 0) return Work::completed("scatter (empty)");
  return submit({OpKind::kScatter, output.dtype, ReduceOp::kSum, opts.root, output.count, 0}, input, output,
                opts.timeout);
}

WorkPtr TcpProcessGroup::do_reduce_scatter(Buffer input, Buffer output, ReduceScatterOptions opts) {
  if (output.count == 0) return Work::completed("reduce_scatter (empty)");
  return submit({OpKind::kReduceScatter, output.dtype, opts.op, -1, output.count, 0}, input, output,
                opts.timeout);
}

WorkPtr TcpProcessGroup::do_all_to_all(Buffer input, Buffer output, AllToAllOptions opts) {
  if (input.count == 0) return Work::completed("all_to_all (empty)");
  return submit({OpKind::kAllToAll, input.dtype, ReduceOp::kSum, -1, input.count, 0}, input, output,
                opts.timeout);
}

WorkPtr TcpProcessGroup::do_barrier(BarrierOptions opts) {
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
    } else if (task.started && shm_) {
      shm_->finish(task.ctx, task.in, task.out);
    } else if (task.started && hierarchy_) {
      hierarchy_->finish(task.ctx, task.in, task.step);
    } else if (task.started) {
      sockets_->finish(task.ctx, task.in);
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
