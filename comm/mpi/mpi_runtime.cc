#include "comm/mpi/mpi_runtime.h"

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <cstdlib>
#include <deque>
#include <map>
#include <mutex>
#include <thread>
#include <vector>

#include "comm/mpi/mpi_runtime_state.h"
#include "common/error.h"
#include "common/log.h"
#include "common/settings.h"

// How the MPI thread works (the contract: mpi_runtime.h; its init, loop and finalize:
// mpi_runtime_loop.cc).
// - It initializes MPI on itself (MPI_Init_thread requesting MPI_THREAD_MULTIPLE, or the level
//   in DDP_MPI_THREAD_LEVEL) and makes the later MPI calls, but for small ops a caller starts
//   while it is idle (run_here). One thread calls MPI at a time (the baton), so any provided
//   level is correct: with less than MULTIPLE this *is* the serialized fallback (below
//   SERIALIZED only this thread calls MPI), with MULTIPLE the application may also use MPI
//   itself. If the application initialized MPI first, MULTIPLE is required.

// - Ops are started in post order per channel (one channel per group, so every rank starts a
//   communicator's collectives in the same order); a channel's Works finish in post order.
//   Nonblocking MPI calls (MPI_Iallreduce, MPI_Isend, ...) are progressed with MPI_Test, and
//   groups using them never block each other (ranks that interleave two such groups
//   differently cannot deadlock). A channel opened with blocking collectives runs them as the
//   blocking calls (MPI_Allreduce, ...): MPI's tuned algorithms instead of its nonblocking
//   ones (several times faster in Open MPI), at the price that the MPI thread waits inside the
//   call. At most one such channel should exist (the world group's): a blocked call still
//   progresses every started nonblocking op, so it can only wait for its own peers.

// - MPI has no timeouts: an op past its deadline fails with a TimeoutError and breaks its
//   channel (every pending and later op fails with it). A timed-out send/recv is cancelled; a
//   collective cannot be, so it stays tested in the background, and if it never completes MPI
//   is not finalized at exit (it would hang). A blocking call is watched by MpiWatchdog: at its
//   deadline its Work fails, and so does every op in flight or posted while the MPI thread is
//   stuck in it (other ops' deadlines are checked when the call returns); new ops fail at once
//   until it returns.

// - Small collectives (run_here) start on the caller's thread while this thread is idle. One
//   not done within the poll is parked: a thread that then waits for it (MpiWork::wait) goes
//   on testing it itself (drive) until it is done, so a caller that waits at once pays no
//   hand-off to this thread and no wake-up back (under mpirun's binding both threads share a
//   core, where a handed-over op finishes later than one driven to the end). This
//   thread adopts a parked op nobody waits for after another poll (an `async` caller's op
//   still moves while it computes), and takes a driven one over as soon as anything else is
//   queued (or at the waiter's own timeout).
// - Hand-off: after its last op the MPI thread polls for the next one (yielding the core each
//   pass) for poll_budget() before it sleeps, and a thread waiting on an op polls for as long
//   before it sleeps (MpiWork): a small op then costs no futex wake-up either way (on a VM
//   one costs many times MPI's own latency). DDP_MPI_POLL_US overrides; 0 sleeps at once.

// - Finalize: at exit (atexit), if this runtime initialized MPI and nothing is in flight.
//   After that every use is a BackendError; MPI is never called after finalize.

namespace ddp::comm::mpi_backend {
const char* thread_level_name(int level) {
  switch (level) {
    case MPI_THREAD_SINGLE: return "MPI_THREAD_SINGLE";
    case MPI_THREAD_FUNNELED: return "MPI_THREAD_FUNNELED";
    case MPI_THREAD_SERIALIZED: return "MPI_THREAD_SERIALIZED";
    case MPI_THREAD_MULTIPLE: return "MPI_THREAD_MULTIPLE";
    default: return "unknown";
  }
}

std::chrono::microseconds poll_budget_from_env() {
  return std::chrono::microseconds(settings::int_value(settings::kMpiPollUs));
}

std::string mpi_error_string(int code) {
  char text[MPI_MAX_ERROR_STRING] = {};
  int len = 0;
  if (MPI_Error_string(code, text, &len) != MPI_SUCCESS) return "MPI error " + std::to_string(code);
  return std::string(text, static_cast<size_t>(len));
}

void MpiRuntime::Impl::test_zombies() {
  zombies.erase(std::remove_if(zombies.begin(), zombies.end(),
                               [](Zombie& z) {
                                 int flag = 0;
                                 return MPI_Test(&z.request, &flag, MPI_STATUS_IGNORE) != MPI_SUCCESS || flag;
                               }),
                zombies.end());
}

void MpiRuntime::Impl::break_channel(Channel& ch, std::exception_ptr error) {
  if (!ch.broken) {
    ch.broken = std::move(error);
    std::lock_guard<std::mutex> lock(mu);
    broken.emplace(ch.id, ch.broken);  // run_here fails the channel's ops too
    any_broken.store(true, std::memory_order_relaxed);
  }
  // Finish in order: completed ops succeed, the rest fail with the channel's error.
  while (!ch.inflight.empty()) {
    Inflight f = std::move(ch.inflight.front());
    ch.inflight.pop_front();
    f.abandon(zombies);
    f.op.work->finish(f.done ? nullptr : ch.broken);
  }
  for (Inflight& f : ch.held) f.op.work->finish(ch.broken);
  ch.held.clear();
}

std::exception_ptr timeout_error(const MpiOp& op) {
  return std::make_exception_ptr(
      TimeoutError(op.what() + ": timed out after " + std::to_string(op.timeout.count()) +
                       " ms (MPI cannot say which ranks are missing; the group is broken, rebuild it)",
                   __FILE__, __LINE__));
}

Channel& MpiRuntime::Impl::channel(uint64_t id) {
  auto [it, created] = channels.try_emplace(id);
  Channel& ch = it->second;
  std::lock_guard<std::mutex> lock(mu);
  if (created) {
    ch.id = id;
    ch.blocking = opened[id];
    opened.erase(id);
  }
  if (!ch.broken) {
    if (auto b = broken.find(id); b != broken.end()) ch.broken = b->second;  // by a run_here op
  }
  return ch;
}

void MpiRuntime::Impl::start(uint64_t id, MpiOp op) {
  Channel& ch = channel(id);
  if (ch.broken) {
    op.work->finish(ch.broken);
    return;
  }
  Inflight f{std::move(op), MPI_REQUEST_NULL, false, Clock::now()};
  f.deadline += f.op.timeout;
  ch.held.push_back(std::move(f));
  start_held(ch);
}

// Starts the channel's held ops in post order, up to the first steps op that must wait for
// its turn: kMaxStepsInFlight of the channel's since the oldest one not finished, done or not.
// A window, not a count of those still running: steps ops finish out of order, and one that
// started while an older one with the same tags still ran could post its receive first and
// take that one's message.
void MpiRuntime::Impl::start_held(Channel& ch) {
  while (!ch.held.empty() && !ch.broken) {
    if (ch.held.front().op.steps) {
      const auto window = std::count_if(ch.inflight.begin(), ch.inflight.end(),
                                        [](const Inflight& f) { return f.op.steps != nullptr; });
      if (window >= kMaxStepsInFlight) return;
    }
    Inflight f = std::move(ch.held.front());
    ch.held.pop_front();
    start_now(ch, std::move(f));
  }
}

void MpiRuntime::Impl::start_now(Channel& ch, Inflight f) {
  if (ch.blocking && f.op.can_block) return run_blocking(ch, std::move(f));
  std::exception_ptr error;
  try {
    int rc = f.begin();
    if (rc != MPI_SUCCESS)
      error = std::make_exception_ptr(
          BackendError(f.op.what() + ": " + mpi_error_string(rc), __FILE__, __LINE__));
  } catch (...) {
    error = std::current_exception();
  }
  if (error) {
    f.abandon(zombies);  // a steps op may have posted part of a round
    break_channel(ch, error);
    f.op.work->finish(error);
    return;
  }
  ch.inflight.push_back(std::move(f));
}

// The blocking form of a collective, watched: completed ops join the channel's queue done (so
// Works still finish in post order, after any earlier send/recv still in flight).
void MpiRuntime::Impl::run_blocking(Channel& ch, Inflight f) {
  std::vector<WorkPtr> others;  // in flight elsewhere: failed too if this call gets stuck
  for (auto& [id, c] : channels) {
    for (auto& g : c.inflight) {
      if (!g.done) others.push_back(g.op.work);
    }
  }
  watchdog.arm(f.deadline, [this, &op = f.op, others] { on_stuck(op, others); });
  int rc = MPI_ERR_OTHER;
  std::exception_ptr error;
  try {
    rc = f.op.start(nullptr);
  } catch (...) {
    error = std::current_exception();
  }
  if (!watchdog.disarm()) {  // the Work failed at its deadline; the call returned since
    {
      std::lock_guard<std::mutex> lock(mu);
      stuck_in.clear();
    }
    break_channel(ch, timeout_error(f.op));
    return;
  }
  if (!error && rc != MPI_SUCCESS) {
    error =
        std::make_exception_ptr(BackendError(f.op.what() + ": " + mpi_error_string(rc), __FILE__, __LINE__));
  }
  if (error) {
    break_channel(ch, error);
    f.op.work->finish(error);
    return;
  }
  f.done = true;
  ch.inflight.push_back(std::move(f));
}

// On the watchdog's thread, while the MPI thread is stuck in `op`'s blocking call: fail it, the
// ops in flight and posted, and refuse new ones until the call returns.
void MpiRuntime::Impl::on_stuck(const MpiOp& op, const std::vector<WorkPtr>& others) {
  op.work->finish(timeout_error(op));
  auto blocked = std::make_exception_ptr(TimeoutError(
      "mpi: the MPI thread is stuck in " + op.what() + ", which timed out (MPI cannot interrupt it)",
      __FILE__, __LINE__));
  std::deque<std::pair<uint64_t, MpiOp>> dropped;
  {
    std::lock_guard<std::mutex> lock(mu);
    stuck_in = op.what();
    dropped.swap(posted);
    commands.clear();  // their callers get a broken promise: an error, not a hang
  }
  for (auto& w : others) w->finish(blocked);
  for (auto& [id, o] : dropped) o.work->finish(blocked);
}

void MpiRuntime::Impl::finish_front(Channel& ch) {
  Inflight f = std::move(ch.inflight.front());
  ch.inflight.pop_front();
  std::exception_ptr error;
  if (f.op.done) {
    try {
      f.op.done();
    } catch (...) {
      error = std::current_exception();
    }
  }
  f.op.work->finish(error);
}

// Tests every op of the channel; finishes the completed prefix; enforces deadlines.
bool MpiRuntime::Impl::progress(Channel& ch) {
  bool progressed = false;
  for (auto& f : ch.inflight) {
    if (f.done) continue;
    if (int rc = f.test(); rc != MPI_SUCCESS) {
      break_channel(ch, std::make_exception_ptr(
                            BackendError(f.op.what() + ": " + mpi_error_string(rc), __FILE__, __LINE__)));
      return true;
    }
    progressed |= f.done;
  }
  while (!ch.inflight.empty() && ch.inflight.front().done) finish_front(ch);
  if (progressed) start_held(ch);
  const auto now = Clock::now();
  auto late = [now](const Inflight& f) { return !f.done && now >= f.deadline; };
  for (const std::deque<Inflight>* q : {&ch.inflight, &ch.held}) {
    if (auto f = std::find_if(q->begin(), q->end(), late); f != q->end()) {
      break_channel(ch, timeout_error(f->op));
      return true;
    }
  }
  return progressed;
}

MpiRuntime::MpiRuntime() : impl_(std::make_unique<Impl>()), poll_budget_(poll_budget_from_env()) {
  std::promise<void> ready;
  auto started = ready.get_future();
  impl_->thread = std::thread([this, &ready] { impl_->run(*this, ready); });
  try {
    started.get();
  } catch (...) {
    impl_->thread.join();
    throw;
  }
}

MpiRuntime& MpiRuntime::instance() {
  static std::mutex mu;
  static MpiRuntime* runtime = nullptr;  // never deleted: its thread must outlive static destructors
  static std::exception_ptr failed;
  std::lock_guard<std::mutex> lock(mu);
  if (failed) std::rethrow_exception(failed);
  if (runtime == nullptr) {
    try {
      runtime = new MpiRuntime();
    } catch (...) {
      failed = std::current_exception();
      throw;
    }
    std::atexit([] { runtime->shutdown(); });
  }
  if (runtime->impl_->stopped) DDP_THROW(BackendError, "mpi: MPI was already finalized (process exit)");
  return *runtime;
}

void MpiRuntime::submit_command(std::function<void()> command) {
  {
    std::lock_guard<std::mutex> lock(impl_->mu);
    if (impl_->stopped || impl_->stop)
      DDP_THROW(BackendError, "mpi: MPI was already finalized (process exit)");
    if (!impl_->stuck_in.empty()) {
      DDP_THROW(TimeoutError, "mpi: the MPI thread is stuck in ", impl_->stuck_in, ", which timed out");
    }
    impl_->commands.push_back(std::move(command));
    impl_->submitted.fetch_add(1, std::memory_order_release);
  }
  impl_->cv.notify_all();
}

uint64_t MpiRuntime::open_channel(bool blocking_collectives) {
  const uint64_t id = impl_->next_channel++;
  std::lock_guard<std::mutex> lock(impl_->mu);
  impl_->opened[id] = blocking_collectives;
  return id;
}

void MpiRuntime::post(uint64_t channel, MpiOp op) {
  std::string stuck;
  {
    std::lock_guard<std::mutex> lock(impl_->mu);
    stuck = impl_->stuck_in;
    if (!impl_->stopped && !impl_->stop && stuck.empty()) {
      impl_->posted.emplace_back(channel, std::move(op));
      impl_->submitted.fetch_add(1, std::memory_order_release);
      op.work = nullptr;  // NOLINT(bugprone-use-after-move): reset, so the failure path below skips it
    }
  }
  if (op.work && !stuck.empty()) {
    op.work->finish(std::make_exception_ptr(TimeoutError(
        op.what() + ": the MPI thread is stuck in " + stuck + ", which timed out", __FILE__, __LINE__)));
    return;
  }
  if (op.work) {
    op.work->finish(
        std::make_exception_ptr(BackendError(op.what() + ": MPI was already finalized", __FILE__, __LINE__)));
    return;
  }
  impl_->cv.notify_all();
}

void MpiRuntime::close_channel(uint64_t channel, std::function<void()> on_drained) {
  {
    std::lock_guard<std::mutex> lock(impl_->mu);
    if (impl_->stopped || impl_->stop) return;  // MPI is gone with everything it owned
    impl_->closes.emplace_back(channel, std::move(on_drained));
    impl_->submitted.fetch_add(1, std::memory_order_release);
  }
  impl_->cv.notify_all();
}

void MpiRuntime::at_finalize(std::function<void()> fn) { impl_->finalizers.push_back(std::move(fn)); }

MPI_Comm MpiRuntime::world_comm() const { return impl_->world; }
void MpiRuntime::set_world_comm(MPI_Comm comm) { impl_->world = comm; }

void MpiRuntime::shutdown() noexcept {
  {
    std::lock_guard<std::mutex> lock(impl_->mu);
    if (impl_->stop) return;
    impl_->stop = true;
    impl_->submitted.fetch_add(1, std::memory_order_release);
    if (!impl_->stuck_in.empty()) {
      // Joining would wait for a call that may never return; MPI is not finalized either.
      logger("mpi")->warn("mpi: the MPI thread is stuck in {}; MPI_Finalize skipped", impl_->stuck_in);
      impl_->thread.detach();
      return;
    }
  }
  impl_->cv.notify_all();
  if (impl_->thread.joinable()) impl_->thread.join();
}

}  // namespace ddp::comm::mpi_backend
