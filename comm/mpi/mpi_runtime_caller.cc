// MpiRuntime's caller side: a small op started and tested on the calling thread while the
// MPI thread is idle (run_here), parked if it is not done within the poll budget, driven on by
// its waiter (drive) or adopted by the MPI thread (adopt), and the baton that keeps one thread
// in MPI at a time (take_baton).
#include <algorithm>
#include <optional>
#include <thread>

#include "comm/mpi/mpi_runtime_state.h"
#include "common/error.h"

namespace ddp::comm::mpi_backend {
namespace {

constexpr unsigned kTestsPerClockRead = 8;

// A caller's hold on the baton, taken by run_here's compare-exchange: given back at scope end.
class BatonHold {
 public:
  explicit BatonHold(std::atomic<int>& baton) : baton_(baton) {}
  ~BatonHold() { baton_.store(kBatonFree, std::memory_order_release); }
  BatonHold(const BatonHold&) = delete;
  BatonHold& operator=(const BatonHold&) = delete;

 private:
  std::atomic<int>& baton_;
};

}  // namespace

// A run_here op the caller could not finish: tested from now on like one started here.
void MpiRuntime::Impl::adopt(uint64_t id, Inflight f) {
  Channel& ch = channel(id);
  if (ch.broken) {  // broken meanwhile: a collective cannot be cancelled, only left to complete
    f.abandon(zombies);
    f.op.work->finish(ch.broken);
    return;
  }
  ch.inflight.push_back(std::move(f));
}

// Under mu, on the MPI thread: a parked op nobody drives is adopted once due; one is taken
// with anything else queued (ahead of it: it started first).
void MpiRuntime::Impl::adopt_parked(std::deque<std::pair<uint64_t, Inflight>>& into, bool force) {
  if (!parked || (!force && Clock::now() < parked->adopt_at)) return;
  into.emplace_front(parked->channel, std::move(parked->f));
  parked.reset();
  has_parked.store(false, std::memory_order_relaxed);
}

// Nothing queued since the MPI thread last emptied the queues (it empties them only with the
// baton, which the caller holds now), and no channel broken: no lock. A post of this channel
// happened before this call (the group's ops are issued in order), so `submitted` shows it.
bool MpiRuntime::Impl::callers_turn(uint64_t channel, std::exception_ptr& error) {
  if (stopped.load(std::memory_order_relaxed)) return false;  // post() says why
  if (submitted.load(std::memory_order_acquire) == taken.load(std::memory_order_acquire) &&
      !any_broken.load(std::memory_order_relaxed) && !has_parked.load(std::memory_order_acquire)) {
    return true;
  }
  std::lock_guard<std::mutex> lock(mu);
  if (stopped || stop || !stuck_in.empty()) return false;  // post() says why
  if (parked) return false;  // one at a time; the MPI thread adopts it before this one
  auto queued = [channel](const auto& q) {
    return std::any_of(q.begin(), q.end(), [channel](const auto& e) { return e.first == channel; });
  };
  if (queued(posted) || queued(adopted)) return false;  // the MPI thread starts those first
  if (auto b = broken.find(channel); b != broken.end()) error = b->second;
  return true;
}

// The MPI thread calls MPI only with the baton: it waits while a caller's op runs (microseconds:
// run_here hands anything longer over).
bool MpiRuntime::Impl::try_take_baton() {
  if (baton.load(std::memory_order_acquire) == kBatonThread) return true;
  int expected = kBatonFree;
  return baton.compare_exchange_strong(expected, kBatonThread, std::memory_order_acquire);
}

void MpiRuntime::Impl::take_baton() {
  for (int b = baton.load(std::memory_order_acquire); b != kBatonThread;
       b = baton.load(std::memory_order_acquire)) {
    int expected = kBatonFree;
    if (baton.compare_exchange_weak(expected, kBatonThread, std::memory_order_acquire)) return;
    std::this_thread::yield();
  }
}

WorkPtr MpiRuntime::run_here(uint64_t channel, MpiOp& op, WorkMaker make_work) {
  if (provided_ < MPI_THREAD_SERIALIZED) return nullptr;  // only the MPI thread may call MPI
  Impl& im = *impl_;
  int expected = kBatonFree;
  if (!im.baton.compare_exchange_strong(expected, kBatonCaller, std::memory_order_acquire)) return nullptr;
  Inflight f;
  std::exception_ptr error;
  {
    BatonHold hold(im.baton);  // given back before the Work finishes (its callbacks may post)
    if (!im.callers_turn(channel, error)) return nullptr;
    f.op = std::move(op);  // taken: the caller does not post it
    if (!error) {
      std::vector<Zombie> left;
      int rc = MPI_SUCCESS;
      const bool finished = im.start_here(f, poll_budget_, rc, error, left);
      if (!left.empty()) im.add_orphans(std::move(left));
      if (!finished || error || rc != MPI_SUCCESS) f.op.work = make_work();
      if (!finished) {
        WorkPtr work = f.op.work;
        im.park(channel, std::move(f), poll_budget_);
        return work;
      }
      error = im.conclude_here(channel, f, rc, error);
    }
  }
  if (!error && f.op.done) {
    try {
      f.op.done();
    } catch (...) {
      error = std::current_exception();
    }
  }
  if (!error && !f.op.work) {
    // Back to the caller: nothing else ever held them. (op was moved from: only its steps
    // are set again.)
    op.steps = std::move(f.op.steps);  // NOLINT(bugprone-use-after-move)
    return im.finished_here;
  }
  if (!error) return f.op.work;
  if (!f.op.work) f.op.work = make_work();
  f.op.work->finish(error);
  return f.op.work;
}

std::exception_ptr MpiRuntime::Impl::conclude_here(uint64_t channel, Inflight& f, int rc,
                                                   std::exception_ptr error) {
  if (!error && rc != MPI_SUCCESS) {
    error =
        std::make_exception_ptr(BackendError(f.op.what() + ": " + mpi_error_string(rc), __FILE__, __LINE__));
  }
  if (error) {
    std::lock_guard<std::mutex> lock(mu);
    broken.emplace(channel, error);  // the channel's later ops fail with it, as on the MPI thread
    any_broken.store(true, std::memory_order_relaxed);
  }
  return error;
}

// A caller's op not done within the poll, left for its waiter to drive. Its deadline counts
// from here, late by the poll at most (microseconds; deadlines are seconds): an op that
// finishes on the caller reads no clock for it. The MPI thread is woken to adopt it when due
// (it sleeps untimed while idle).
void MpiRuntime::Impl::park(uint64_t channel, Inflight f, std::chrono::microseconds poll) {
  const auto now = Clock::now();
  f.deadline = now + f.op.timeout;
  {
    std::lock_guard<std::mutex> lock(mu);
    parked.emplace(Parked{channel, std::move(f), now + poll});
    has_parked.store(true, std::memory_order_release);
  }
  cv.notify_all();
}

// A driven op its waiter gives up (something else is queued, or a timeout is near): the MPI
// thread goes on with it, deadline and all.
void MpiRuntime::Impl::hand_over(uint64_t channel, Inflight f) {
  {
    std::lock_guard<std::mutex> lock(mu);
    adopted.emplace_back(channel, std::move(f));
    submitted.fetch_add(1, std::memory_order_release);
  }
  cv.notify_all();
}

// Requests a caller's failed op left outstanding: the MPI thread tests them until MPI lets go.
void MpiRuntime::Impl::add_orphans(std::vector<Zombie> left) {
  {
    std::lock_guard<std::mutex> lock(mu);
    for (Zombie& z : left) orphans.push_back(std::move(z));
    submitted.fetch_add(1, std::memory_order_release);
  }
  cv.notify_all();
}

// Starts f and tests it for the poll budget (timed from the first clock read, kTestsPerClockRead
// tests in: an op done by then reads no clock): true when it completed, or failed (an
// MPI error code in `rc`, or an exception in `error`, with any requests it leaves outstanding
// in `left`); false when it is still in flight.
bool MpiRuntime::Impl::start_here(Inflight& f, std::chrono::microseconds poll, int& rc,
                                  std::exception_ptr& error, std::vector<Zombie>& left) {
  try {
    rc = f.begin();
  } catch (...) {
    error = std::current_exception();
    return true;
  }
  // Only the baton's holder writes it: no read-modify-write (a locked instruction) needed.
  ran_here.store(ran_here.load(std::memory_order_relaxed) + 1, std::memory_order_relaxed);
  // The clock is read every kTestsPerClockRead tests: reading it costs about what a test does.
  Clock::time_point until{};
  for (unsigned tests = 1; rc == MPI_SUCCESS && (rc = f.test()) == MPI_SUCCESS && !f.done; ++tests) {
    if (tests % kTestsPerClockRead != 0) continue;
    const auto now = Clock::now();
    if (until == Clock::time_point{}) until = now + poll;
    if (now >= until) break;
  }
  if (rc != MPI_SUCCESS) {
    f.abandon(left);
    return true;
  }
  return f.done;
}

// The baton for a waiter: the MPI thread holds it, while it has nothing in flight, only for a
// pass over its queues. Gives up after `patience` (the MPI thread then adopts the op).
bool MpiRuntime::Impl::take_baton_to_drive(std::chrono::microseconds patience) {
  const auto give_up = Clock::now() + patience;
  for (;;) {
    int expected = kBatonFree;
    if (baton.compare_exchange_strong(expected, kBatonCaller, std::memory_order_acquire)) return true;
    if (!has_parked.load(std::memory_order_acquire) || Clock::now() >= give_up) return false;
    std::this_thread::yield();
  }
}

// Tests the claimed op f until it is done or failed (true), or until `stop` or until something
// is queued for the MPI thread (false: it should take f over).
bool MpiRuntime::Impl::drive_here(Inflight& f, Clock::time_point stop, int& rc, std::exception_ptr& error) {
  try {
    for (unsigned tests = 1;; ++tests) {
      if ((rc = f.test()) != MPI_SUCCESS || f.done) return true;
      if (tests % kTestsPerClockRead != 0) continue;
      if (submitted.load(std::memory_order_acquire) != taken.load(std::memory_order_acquire)) return false;
      if (Clock::now() >= stop) return false;
    }
  } catch (...) {
    error = std::current_exception();
    return true;
  }
}

void MpiRuntime::drive(const Work& work, Clock::time_point until) noexcept {
  Impl& im = *impl_;
  if (!im.has_parked.load(std::memory_order_acquire)) return;
  if (!im.take_baton_to_drive(poll_budget_)) return;
  std::optional<Parked> p;
  std::exception_ptr error;
  {
    BatonHold hold(im.baton);  // given back before the Work finishes (its callbacks may post)
    {
      std::lock_guard<std::mutex> lock(im.mu);
      if (!im.parked || im.parked->f.op.work.get() != &work) return;  // adopted, or another's
      p.swap(im.parked);
      im.has_parked.store(false, std::memory_order_relaxed);
    }
    int rc = MPI_SUCCESS;
    if (!im.drive_here(p->f, std::min(until, p->f.deadline), rc, error)) {
      im.hand_over(p->channel, std::move(p->f));
      return;
    }
    im.driven_here.store(im.driven_here.load(std::memory_order_relaxed) + 1, std::memory_order_relaxed);
    if (rc != MPI_SUCCESS || error) {
      std::vector<Zombie> left;
      p->f.abandon(left);
      if (!left.empty()) im.add_orphans(std::move(left));
    }
    error = im.conclude_here(p->channel, p->f, rc, error);
  }
  if (!error && p->f.op.done) {
    try {
      p->f.op.done();
    } catch (...) {
      error = std::current_exception();
    }
  }
  p->f.op.work->finish(error);
}

MpiWork::MpiWork(MpiRuntime& runtime, std::string description)
    : Work(std::move(description)), runtime_(runtime) {}

std::chrono::microseconds MpiWork::poll_before_sleep() const noexcept { return runtime_.poll_budget(); }

void MpiWork::drive(Clock::time_point until) noexcept { runtime_.drive(*this, until); }

const WorkPtr& MpiRuntime::finished_here() const { return impl_->finished_here; }

uint64_t MpiRuntime::ran_here() const { return impl_->ran_here.load(std::memory_order_relaxed); }

uint64_t MpiRuntime::driven_here() const { return impl_->driven_here.load(std::memory_order_relaxed); }

}  // namespace ddp::comm::mpi_backend
