#pragma once
// MpiWatchdog: a deadline for a blocking MPI call. MPI cannot interrupt a call it is in (nor
// cancel a collective), so while the MPI thread is blocked, this thread watches the clock: at
// the deadline it runs the expiry action (fail the op's Work with a TimeoutError, refuse new
// work) on its own thread, and the MPI thread learns of it when the call returns, if ever.
// One call is watched at a time (the MPI thread makes one blocking call at a time).
#include <condition_variable>
#include <functional>
#include <mutex>
#include <optional>
#include <thread>

#include "common/deadline.h"

namespace ddp::comm::mpi_backend {

class MpiWatchdog {
 public:
  MpiWatchdog();
  ~MpiWatchdog();  // stops the thread (an armed watch is dropped, its action never runs)
  MpiWatchdog(const MpiWatchdog&) = delete;
  MpiWatchdog& operator=(const MpiWatchdog&) = delete;

  // Watches until `deadline`; then runs on_expiry once, on the watchdog's thread.
  void arm(Clock::time_point deadline, std::function<void()> on_expiry);
  // Ends the watch: true when the call beat the deadline; false when on_expiry ran (this
  // waits for it to finish, so its effects are visible to the caller).
  bool disarm();

 private:
  void run();

  std::mutex mu_;
  std::condition_variable cv_;
  bool armed_ = false;
  bool firing_ = false;
  bool fired_ = false;
  bool stop_ = false;
  Clock::time_point deadline_{};
  std::optional<Clock::time_point> sleeping_until_;  // the thread's wake-up time; none: asleep until notified
  std::function<void()> on_expiry_;
  std::thread thread_;
};

}  // namespace ddp::comm::mpi_backend
