#include "comm/mpi/mpi_runtime.h"

#include <algorithm>
#include <array>
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

// How the MPI thread works (the contract: mpi_runtime.h).
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

namespace {

constexpr int kSpinPasses = 256;
// An op in flight that stopped moving: the MPI thread yields its core for this long since it
// last moved before it sleeps kMaxBackoff at a time (MpiRuntime::Impl::back_off).
constexpr std::chrono::milliseconds kYieldBeforeSleep{20};
constexpr std::chrono::microseconds kMaxBackoff{50};

// DDP_MPI_THREAD_LEVEL's choices, in the table's order.
static_assert(settings::choices_are(settings::kMpiThreadLevel, "single|funneled|serialized|multiple"));
int requested_level() {
  const std::array<int, 4> levels = {MPI_THREAD_SINGLE, MPI_THREAD_FUNNELED, MPI_THREAD_SERIALIZED,
                                     MPI_THREAD_MULTIPLE};
  return levels[settings::choice_index(settings::kMpiThreadLevel)];
}

}  // namespace

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

// Idle: polls for a submission past `seen` until poll_end (yielding each pass), then sleeps
// until one comes, or until a parked op nobody drives is due (adopt_parked).
void MpiRuntime::Impl::await_submission(std::unique_lock<std::mutex>& lock, uint64_t seen,
                                        Clock::time_point poll_end) {
  if (submitted.load(std::memory_order_acquire) == seen && Clock::now() < poll_end) {
    lock.unlock();
    while (submitted.load(std::memory_order_acquire) == seen && Clock::now() < poll_end) {
      std::this_thread::yield();
    }
    lock.lock();
  }
  while (submitted.load(std::memory_order_relaxed) == seen) {
    if (!parked) {
      cv.wait(lock);
      continue;
    }
    if (Clock::now() >= parked->adopt_at) return;
    // Its waiter usually takes it within microseconds (drive): yield to it rather than sleep
    // on a timer that would wake this thread again while the waiter drives the op.
    lock.unlock();
    std::this_thread::yield();
    lock.lock();
  }
}

bool MpiRuntime::Impl::has_work() const {
  return stop || !commands.empty() || !posted.empty() || !closes.empty() || !adopted.empty();
}

// Ops in flight that have not moved for kSpinPasses passes: MPI moves their data only inside
// our MPI_Test calls, so the thread goes on testing, yielding its core between passes, for
// kYieldBeforeSleep since they last moved; only then does it sleep, kMaxBackoff at a time. A
// timed sleep ends late (timer slack), and a sleeping MPI thread stalls the peer that waits for
// its next message, which then stalls in turn; yielding costs a waiting core nothing it could use.
void MpiRuntime::Impl::back_off(std::unique_lock<std::mutex>& lock, Clock::time_point quiet_since) {
  if (Clock::now() - quiet_since < kYieldBeforeSleep) {
    lock.unlock();
    std::this_thread::yield();
    lock.lock();
    return;
  }
  cv.wait_for(lock, kMaxBackoff, [&] { return has_work(); });
}

void MpiRuntime::Impl::run(MpiRuntime& rt, std::promise<void>& ready) {
  try {
    int initialized = 0;
    MPI_Initialized(&initialized);
    if (initialized) {
      MPI_Query_thread(&rt.provided_);
      if (rt.provided_ != MPI_THREAD_MULTIPLE) {
        DDP_THROW(BackendError, "mpi: the application initialized MPI with ", thread_level_name(rt.provided_),
                  "; sharing MPI with the mpi backend's thread needs MPI_THREAD_MULTIPLE (or let the backend "
                  "initialize MPI)");
      }
    } else {
      int rc = MPI_Init_thread(nullptr, nullptr, requested_level(), &rt.provided_);
      if (rc != MPI_SUCCESS) DDP_THROW(BackendError, "mpi: MPI_Init_thread failed: ", mpi_error_string(rc));
      rt.owns_init_ = true;
    }
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    MPI_Comm_rank(MPI_COMM_WORLD, &rt.world_rank_);
    MPI_Comm_size(MPI_COMM_WORLD, &rt.world_size_);
    void* ub = nullptr;
    int found = 0;
    if (MPI_Comm_get_attr(MPI_COMM_WORLD, MPI_TAG_UB, &ub, &found) == MPI_SUCCESS && found)
      rt.tag_ub_ = *static_cast<int*>(ub);
    logger("mpi")->debug("MPI rank {}/{} initialized ({}), thread level {}", rt.world_rank_, rt.world_size_,
                         rt.owns_init_ ? "by the backend" : "by the application",
                         thread_level_name(rt.provided_));
    ready.set_value();
  } catch (...) {
    stopped = true;
    ready.set_exception(std::current_exception());
    return;
  }
  int idle = 0;                   // consecutive passes without progress while ops are in flight
  Clock::time_point quiet_since;  // the first of those passes
  uint64_t seen = 0;              // `submitted` when the queues were last taken
  Clock::time_point poll_end;     // the hand-off's poll, from the last pass that did something
  for (;;) {
    std::deque<std::function<void()>> commands_now;
    std::deque<std::pair<uint64_t, MpiOp>> posted_now;
    std::deque<std::pair<uint64_t, std::function<void()>>> closes_now;
    std::deque<std::pair<uint64_t, Inflight>> adopted_now;
    bool stopping = false;
    {
      std::unique_lock<std::mutex> lock(mu);
      bool busy = !zombies.empty() || std::any_of(channels.begin(), channels.end(),
                                                  [](const auto& c) { return !c.second.inflight.empty(); });
      // (held ops wait only behind ops in flight: a channel with held ops is busy)
      if (!busy) {
        baton.store(kBatonFree, std::memory_order_release);  // idle: callers may run small ops
        await_submission(lock, seen, poll_end);
      } else if (idle > kSpinPasses) {
        back_off(lock, quiet_since);
      }
      // The baton before anything leaves the queues: a caller that holds it then sees every op
      // not yet started in them, and starts nothing ahead of those (run_here). Not waited for
      // under mu: the caller takes mu to check the queues and to hand its op over.
      while (!try_take_baton()) {
        lock.unlock();
        std::this_thread::yield();
        lock.lock();
        // A waiter took the parked op that woke this thread and drives it: sleep until it
        // gives it back or anything is queued, rather than spin for as long as it runs.
        if (!busy && !parked && submitted.load(std::memory_order_relaxed) == seen)
          await_submission(lock, seen, Clock::time_point{});
      }
      commands_now.swap(commands);
      posted_now.swap(posted);
      closes_now.swap(closes);
      adopted_now.swap(adopted);
      adopt_parked(adopted_now, stop || !commands_now.empty() || !posted_now.empty() || !closes_now.empty() ||
                                    !adopted_now.empty());
      for (Zombie& z : orphans) zombies.push_back(std::move(z));
      orphans.clear();
      stopping = stop;
      seen = submitted.load(std::memory_order_relaxed);
      taken.store(seen, std::memory_order_release);
    }
    if (!commands_now.empty() || !posted_now.empty()) poll_end = Clock::now() + rt.poll_budget_;
    for (auto& c : commands_now) c();
    for (auto& [id, f] : adopted_now) adopt(id, std::move(f));  // started before anything posted
    for (auto& [id, op] : posted_now) start(id, std::move(op));
    for (auto& [id, fn] : closes_now) {
      Channel& ch = channel(id);
      ch.closing = true;
      ch.on_drained = std::move(fn);
      std::lock_guard<std::mutex> lock(mu);
      broken.erase(id);
      any_broken.store(!broken.empty(), std::memory_order_relaxed);
    }
    bool progressed = false;
    for (auto it = channels.begin(); it != channels.end();) {
      progressed |= progress(it->second);
      if (it->second.closing && it->second.inflight.empty()) {
        if (it->second.on_drained) it->second.on_drained();
        it = channels.erase(it);
      } else {
        ++it;
      }
    }
    test_zombies();
    if (progressed) poll_end = Clock::now() + rt.poll_budget_;
    if (progressed) {
      idle = 0;
    } else if (++idle == 1) {
      quiet_since = Clock::now();
    }
    if (stopping) break;
  }
  wind_down(rt);
}

// At exit: fail what is left, finalize if we initialized MPI and nothing is in flight.
void MpiRuntime::Impl::wind_down(MpiRuntime& rt) {
  take_baton();
  auto gone =
      std::make_exception_ptr(BackendError("mpi: MPI was shut down at process exit", __FILE__, __LINE__));
  std::deque<std::pair<uint64_t, Inflight>> late;  // a caller's ops given over after the last pass
  {
    std::lock_guard<std::mutex> lock(mu);
    for (auto& [id, op] : posted) op.work->finish(gone);
    posted.clear();
    late.swap(adopted);
    adopt_parked(late, true);
    stopped = true;
  }
  for (auto& [id, f] : late) {
    f.abandon(zombies);
    f.op.work->finish(gone);
  }
  for (auto& [id, ch] : channels) break_channel(ch, gone);
  if (!rt.owns_init_) return;
  // A timed-out op may still complete (its peer was late, not gone): give it a bounded grace.
  const auto grace_end = Clock::now() + kPeerLossDetection;
  while (!zombies.empty() && Clock::now() < grace_end) {
    test_zombies();
    if (!zombies.empty()) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  if (!zombies.empty()) {
    logger("mpi")->warn("mpi: {} timed-out op(s) never completed; MPI_Finalize skipped (it would hang)",
                        zombies.size());
    return;
  }
  for (auto& fn : finalizers) fn();
  MPI_Finalize();
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
