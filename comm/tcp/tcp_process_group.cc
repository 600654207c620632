#include "comm/tcp/tcp_process_group.h"

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

TcpProcessGroup::TcpProcessGroup(const GroupSetup& setup)
    : ProcessGroup(setup.rank, setup.size, setup.options), group_(setup.name), store_(setup.store) {
  health_.init(setup.size);
}

std::string TcpProcessGroup::choices() const { return transport_->choices(); }

std::shared_ptr<GroupMemory> TcpProcessGroup::allocate(size_t bytes) {
  if (auto memory = transport_->allocate(bytes)) return memory;
  return ProcessGroup::allocate(bytes);
}

std::shared_ptr<TcpProcessGroup> TcpProcessGroup::create(const GroupSetup& setup, CreateOptions options) {
  std::shared_ptr<TcpProcessGroup> pg(new TcpProcessGroup(setup));
  if (setup.size > 1) {
    pg->connect(setup, options.ranks_on_host);
  } else {
    pg->transport_ = local_transport();
  }
  if (options.on_caller) pg->inline_ = {InlineBudget::Mode::kToTheEnd, {}};
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

// The health first: every wait that wakes (a socket engine's, a shared-memory one) finds it.
void TcpProcessGroup::do_abort(const std::string& reason) {
  health_.fail(FailureKind::kAborted, -1, reason);
  logger("tcp")->debug("group '{}': aborted: {}", group_, reason);
  if (transport_) transport_->abort(reason);
  for (auto& engine : engines_) engine->interrupt();
}

// ---- submission (arguments were validated by ProcessGroup) ----

WorkPtr TcpProcessGroup::submit(OpDesc desc, const Buffer& in, const Buffer& out, Millis timeout) {
  return submit(desc, in, out, timeout, inline_);
}

WorkPtr TcpProcessGroup::all_reduce_within(const Buffer& buf, ReduceOp op, Millis timeout, Micros budget) {
  if (buf.count == 0) return Work::completed("all_reduce (empty)");
  return submit({OpKind::kAllReduce, buf.dtype, op, -1, buf.count, 0}, buf, {}, timeout,
                {InlineBudget::Mode::kPoll, budget});
}

WorkPtr TcpProcessGroup::submit(OpDesc desc, const Buffer& in, const Buffer& out, Millis timeout,
                                InlineBudget budget) {
  std::unique_lock<std::mutex> lock(mu_);
  desc.seq = next_seq_++;
  Task task;
  task.ctx.desc = desc;
  task.ctx.group = &group_;
  task.ctx.timeout = timeout;
  task.in = in;
  task.out = out;
  const bool idle = queue_.empty() && !busy_;
  if (budget.mode == InlineBudget::Mode::kToTheEnd && idle) return run_on_caller(task, lock);
  if (budget.mode == InlineBudget::Mode::kPoll && idle && transport_->eligible(desc, in)) {
    busy_ = true;
    lock.unlock();
    // The inline attempt only polls, within its own budget: the op's deadline starts when
    // the worker takes over (a clock read saved on the fast path; the budget is microseconds
    // to milliseconds, timeouts are seconds).
    const bool finished = try_inline(task, budget.poll);
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
  const auto poll = transport_->poll_for(std::max(in.bytes(), out.bytes()));
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
bool TcpProcessGroup::try_inline(Task& task, Micros poll) {
  bool finished = false;
  std::exception_ptr error = guarded([&] {
    if (health_.broken()) health_.rethrow(task.ctx.label());
    task.started = true;
    finished = transport_->start(task.ctx, task.in, task.out, poll);
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

WorkPtr TcpProcessGroup::do_recv_any(Buffer buf, std::shared_ptr<int> source, RecvOptions opts) {
  uint64_t n;
  {
    std::lock_guard<std::mutex> lock(mu_);
    n = next_p2p_++;
  }
  std::string label =
      detail::str("recv from any rank (tag ", opts.tag, ", p2p #", n, ") on group '", group_, "'");
  if (buf.bytes() == 0) return Work::completed(label);  // no message is sent for zero bytes
  auto work = std::make_shared<Work>(label);
  engines_[0]->recv_any(Channel::kUser, opts.tag, buf.data, buf.bytes(), Deadline(opts.timeout), work,
                        std::move(label), std::move(source));
  return work;
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
    if (task.started) {
      transport_->finish(task.ctx, task.in, task.out);
    } else {
      transport_->run(task.ctx, task.in, task.out);
    }
  });
  if (!error) collectives_run_.fetch_add(1);
  task.work->finish(error);
}

}  // namespace ddp::comm::tcp
