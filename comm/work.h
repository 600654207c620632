#pragma once
// Work: the handle of one asynchronous operation.
// - wait(timeout) blocks until the op completes; it rethrows the op's exception, and throws a
//   TimeoutError (the op keeps running) if the timeout passes first. kUseDefault waits without
//   a bound of its own: the op's own deadline still ends it.
// - Implementations call finish(exception_ptr) exactly once, from any thread; background
//   threads never throw across threads, they finish the Work with the exception.
// - Callbacks added with then() run once, on the finishing thread (or at once if finished).
// - A backend may tune how wait() waits (see the hooks below): learn that a thread blocks
//   (blocking(): a poller polls hard only then, as tcp does), poll for a while before it sleeps
//   (ops that finish within microseconds on another thread), or have the waiting thread drive
//   the op itself (MPI's progress), sparing a hand-off and a wake-up (as mpi does).
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <exception>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "common/timeouts.h"

namespace ddp::comm {

class Work {
 public:
  explicit Work(std::string description = "op") : description_(std::move(description)) {}
  virtual ~Work() = default;
  Work(const Work&) = delete;
  Work& operator=(const Work&) = delete;

  bool is_completed();
  bool is_success();
  std::exception_ptr exception();
  // Returns true when complete; throws the op's error, or TimeoutError naming the op.
  bool wait(Millis timeout = kUseDefault);
  void then(std::function<void(Work&)> callback);

  void finish(std::exception_ptr error = nullptr);
  const std::string& description() const { return description_; }

  // An already-completed Work (zero-length ops, world size 1).
  static std::shared_ptr<Work> completed(std::string description = "op");

 protected:
  // Around a wait() that finds the op not complete; never with the Work's lock held. Must not
  // throw.
  virtual void blocking(bool /*begin*/) noexcept {}
  // How long a wait() that finds the op not complete polls for it before sleeping (none by
  // default); called after blocking(true).
  virtual std::chrono::microseconds poll_before_sleep() const noexcept { return {}; }
  // Called by a wait() that finds the op not complete, after blocking(true): may progress the
  // op on the waiting thread, finishing it, until `until` (the wait's own timeout, or
  // Clock::time_point::max()) at the latest. Must not throw (an error finishes the Work).
  virtual void drive(Clock::time_point /*until*/) noexcept {}

 private:
  std::string description_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool completed_ = false;
  std::atomic<bool> done_{false};  // completed_, read without the lock while polling
  std::exception_ptr error_;
  std::vector<std::function<void(Work&)>> callbacks_;
};

using WorkPtr = std::shared_ptr<Work>;

// A Work whose wait() polls for completion for `poll` before it sleeps (see above).
class PollingWork final : public Work {
 public:
  PollingWork(std::string description, std::chrono::microseconds poll)
      : Work(std::move(description)), poll_(poll) {}

 protected:
  std::chrono::microseconds poll_before_sleep() const noexcept override { return poll_; }

 private:
  std::chrono::microseconds poll_;
};

// Waits for every Work in order; rethrows the first error after all have finished or failed.
void wait_all(const std::vector<WorkPtr>& works, Millis timeout = kUseDefault);

// A Work that completes after `inner`, running `then` (on the completing thread) first; an
// exception from `inner` or from `then` completes it with that error. For ops that finish
// their results after the collective (multi-buffer fan-out, comm hooks).
WorkPtr chain_work(const WorkPtr& inner, std::function<void()> then, std::string description);

}  // namespace ddp::comm
