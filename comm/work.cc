#include "comm/work.h"

#include <algorithm>
#include <thread>

#include "common/error.h"

namespace ddp::comm {
namespace {

// Polls `done` with a yield per pass until it is set or `budget` has passed.
void poll(const std::atomic<bool>& done, std::chrono::microseconds budget) {
  if (budget.count() <= 0) return;
  const auto end = Clock::now() + budget;
  while (!done.load(std::memory_order_acquire) && Clock::now() < end) std::this_thread::yield();
}

}  // namespace

bool Work::is_completed() { return done_.load(std::memory_order_acquire); }

bool Work::is_success() {
  std::lock_guard<std::mutex> lock(mu_);
  return completed_ && !error_;
}

std::exception_ptr Work::exception() {
  std::lock_guard<std::mutex> lock(mu_);
  return error_;
}

bool Work::wait(Millis timeout) {
  // Finished already (an op that ran on the caller's thread): no lock. error_ is set before
  // done_ is stored (release) and never again, so this acquire load makes it visible.
  if (done_.load(std::memory_order_acquire)) {
    if (error_) std::rethrow_exception(error_);
    return true;
  }
  std::unique_lock<std::mutex> lock(mu_);
  if (!completed_) {
    lock.unlock();
    blocking(true);
    const bool bounded = timeout != kUseDefault && timeout.count() >= 0;
    const auto end = bounded ? Clock::now() + timeout : Clock::time_point::max();
    drive(end);
    auto budget = poll_before_sleep();
    if (bounded) budget = std::min<std::chrono::microseconds>(budget, timeout);
    poll(done_, budget);
    lock.lock();
    bool done = true;
    if (bounded) {
      done = cv_.wait_until(lock, end, [&] { return completed_; });
    } else {
      cv_.wait(lock, [&] { return completed_; });
    }
    lock.unlock();
    blocking(false);
    lock.lock();
    if (!done) DDP_THROW(TimeoutError, description_, ": Work::wait timed out after ", timeout.count(), " ms");
  }
  if (error_) std::rethrow_exception(error_);
  return true;
}

void Work::then(std::function<void(Work&)> callback) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (!completed_) {
      callbacks_.push_back(std::move(callback));
      return;
    }
  }
  callback(*this);
}

void Work::finish(std::exception_ptr error) {
  std::vector<std::function<void(Work&)>> callbacks;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (completed_) return;
    completed_ = true;
    error_ = std::move(error);
    done_.store(true, std::memory_order_release);
    callbacks.swap(callbacks_);
  }
  cv_.notify_all();
  for (auto& cb : callbacks) {
    try {
      cb(*this);
    } catch (...) {
      // A callback's failure must not escape into a backend thread.
    }
  }
}

std::shared_ptr<Work> Work::completed(std::string description) {
  auto w = std::make_shared<Work>(std::move(description));
  w->finish();
  return w;
}

void wait_all(const std::vector<WorkPtr>& works, Millis timeout) {
  std::exception_ptr first;
  for (const auto& w : works) {
    try {
      w->wait(timeout);
    } catch (...) {
      if (!first) first = std::current_exception();
    }
  }
  if (first) std::rethrow_exception(first);
}

WorkPtr chain_work(const WorkPtr& inner, std::function<void()> then, std::string description) {
  auto outer = std::make_shared<Work>(std::move(description));
  inner->then([outer, then = std::move(then)](Work& done) {
    std::exception_ptr error = done.exception();
    if (!error) {
      try {
        then();
      } catch (...) {
        error = std::current_exception();
      }
    }
    outer->finish(error);
  });
  return outer;
}

}  // namespace ddp::comm
