#include "comm/mpi/mpi_watchdog.h"

namespace ddp::comm::mpi_backend {

MpiWatchdog::MpiWatchdog() : thread_([this] { run(); }) {}

MpiWatchdog::~MpiWatchdog() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  thread_.join();
}

// Wakes the thread only when it would otherwise sleep past the new deadline: ops follow one
// another with deadlines seconds to minutes away, so the thread, asleep until an earlier op's
// deadline, wakes then, sees the later one and sleeps again. A wake-up per op would cost a
// context switch per op.
void MpiWatchdog::arm(Clock::time_point deadline, std::function<void()> on_expiry) {
  bool wake = false;
  {
    std::lock_guard<std::mutex> lock(mu_);
    armed_ = true;
    fired_ = false;
    deadline_ = deadline;
    on_expiry_ = std::move(on_expiry);
    wake = !sleeping_until_ || deadline < *sleeping_until_;
  }
  if (wake) cv_.notify_all();
}

bool MpiWatchdog::disarm() {
  std::unique_lock<std::mutex> lock(mu_);
  cv_.wait(lock, [&] { return !firing_; });
  armed_ = false;
  on_expiry_ = nullptr;
  return !fired_;
}

void MpiWatchdog::run() {
  std::unique_lock<std::mutex> lock(mu_);
  while (!stop_) {
    if (!armed_) {
      sleeping_until_.reset();
      cv_.wait(lock);
      continue;
    }
    if (Clock::now() < deadline_) {
      sleeping_until_ = deadline_;
      cv_.wait_until(lock, deadline_);
      sleeping_until_.reset();
      continue;
    }
    // Expired while armed: run the action outside the lock (it finishes Works, whose
    // callbacks may do anything but call back into this watch).
    auto action = std::move(on_expiry_);
    armed_ = false;
    firing_ = true;
    lock.unlock();
    if (action) action();
    lock.lock();
    firing_ = false;
    fired_ = true;
    cv_.notify_all();
  }
}

}  // namespace ddp::comm::mpi_backend
