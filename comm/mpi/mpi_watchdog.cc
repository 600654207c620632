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

void MpiWatchdog::arm(Clock::time_point deadline, std::function<void()> on_expiry) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    armed_ = true;
    fired_ = false;
    deadline_ = deadline;
    on_expiry_ = std::move(on_expiry);
  }
  cv_.notify_all();
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
      cv_.wait(lock);
      continue;
    }
    if (Clock::now() < deadline_) {
      cv_.wait_until(lock, deadline_);
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
