// MpiRuntime's MPI thread (how it works: the top of mpi_runtime.cc): MPI's initialization, the
// loop, one pass at a time (wait for work and take the queues, run them, test every channel),
// and its wind-down at exit. Its channels, op starts and deadlines: mpi_runtime.cc.
#include <algorithm>
#include <array>
#include <chrono>
#include <deque>
#include <functional>
#include <future>
#include <mutex>
#include <thread>

#include "comm/mpi/mpi_runtime_state.h"
#include "common/error.h"
#include "common/log.h"
#include "common/settings.h"
#include "common/timeouts.h"

namespace ddp::comm::mpi_backend {
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

void MpiRuntime::Impl::run(MpiRuntime& rt, std::promise<void>& ready) {
  try {
    init_mpi(rt);
    ready.set_value();
  } catch (...) {
    stopped = true;
    ready.set_exception(std::current_exception());
    return;
  }
  LoopPace pace;
  for (;;) {
    TakenQueues pass = take_queues(pace);
    if (!pass.commands.empty() || !pass.posted.empty()) pace.poll_end = Clock::now() + rt.poll_budget_;
    dispatch(pass);
    const bool progressed = progress_channels();
    test_zombies();
    if (progressed) {
      pace.poll_end = Clock::now() + rt.poll_budget_;
      pace.idle = 0;
    } else if (++pace.idle == 1) {
      pace.quiet_since = Clock::now();
    }
    if (pass.stopping) break;
  }
  wind_down(rt);
}

void MpiRuntime::Impl::init_mpi(MpiRuntime& rt) {
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
}

TakenQueues MpiRuntime::Impl::take_queues(LoopPace& pace) {
  TakenQueues out;
  std::unique_lock<std::mutex> lock(mu);
  await_turn(lock, pace);
  out.commands.swap(commands);
  out.posted.swap(posted);
  out.closes.swap(closes);
  out.adopted.swap(adopted);
  adopt_parked(out.adopted, stop || !out.commands.empty() || !out.posted.empty() || !out.closes.empty() ||
                                !out.adopted.empty());
  for (Zombie& z : orphans) zombies.push_back(std::move(z));
  orphans.clear();
  out.stopping = stop;
  pace.seen = submitted.load(std::memory_order_relaxed);
  taken.store(pace.seen, std::memory_order_release);
  return out;
}

// Idle: frees the baton and waits for a submission; busy and quiet for kSpinPasses: backs off.
// Then takes the baton, before anything leaves the queues: a caller that holds it then sees every
// op not yet started in them, and starts nothing ahead of those (run_here). Not waited for under
// mu: the caller takes mu to check the queues and to hand its op over.
void MpiRuntime::Impl::await_turn(std::unique_lock<std::mutex>& lock, const LoopPace& pace) {
  bool busy = !zombies.empty() || std::any_of(channels.begin(), channels.end(),
                                              [](const auto& c) { return !c.second.inflight.empty(); });
  // (held ops wait only behind ops in flight: a channel with held ops is busy)
  if (!busy) {
    baton.store(kBatonFree, std::memory_order_release);  // idle: callers may run small ops
    await_submission(lock, pace.seen, pace.poll_end);
  } else if (pace.idle > kSpinPasses) {
    back_off(lock, pace.quiet_since);
  }
  while (!try_take_baton()) {
    lock.unlock();
    std::this_thread::yield();
    lock.lock();
    // A waiter took the parked op that woke this thread and drives it: sleep until it
    // gives it back or anything is queued, rather than spin for as long as it runs.
    if (!busy && !parked && submitted.load(std::memory_order_relaxed) == pace.seen)
      await_submission(lock, pace.seen, Clock::time_point{});
  }
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

void MpiRuntime::Impl::dispatch(TakenQueues& pass) {
  for (auto& c : pass.commands) c();
  for (auto& [id, f] : pass.adopted) adopt(id, std::move(f));  // started before anything posted
  for (auto& [id, op] : pass.posted) start(id, std::move(op));
  for (auto& [id, fn] : pass.closes) begin_close(id, std::move(fn));
}

void MpiRuntime::Impl::begin_close(uint64_t id, std::function<void()> on_drained) {
  Channel& ch = channel(id);
  ch.closing = true;
  ch.on_drained = std::move(on_drained);
  std::lock_guard<std::mutex> lock(mu);
  broken.erase(id);
  any_broken.store(!broken.empty(), std::memory_order_relaxed);
}

bool MpiRuntime::Impl::progress_channels() {
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
  return progressed;
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

}  // namespace ddp::comm::mpi_backend
