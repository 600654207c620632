#pragma once
// A point in time on the steady clock, built from a timeout. Blocking calls take a Deadline so
// that nested waits share one budget instead of each restarting the clock.
#include <algorithm>

#include "common/timeouts.h"

namespace ddp {

class Deadline {
 public:
  explicit Deadline(Millis timeout) : start_(Clock::now()), end_(start_ + timeout) {}
  // One that has already passed, without reading the clock (a placeholder to assign later).
  Deadline() = default;
  static Deadline never() { return Deadline(Millis(1000LL * 3600 * 24 * 365)); }

  bool expired() const { return Clock::now() >= end_; }
  Millis remaining() const {
    return std::max(Millis(0), std::chrono::duration_cast<Millis>(end_ - Clock::now()));
  }
  Millis elapsed() const { return std::chrono::duration_cast<Millis>(Clock::now() - start_); }
  // Remaining time as a poll()/epoll_wait() argument, capped, never negative.
  int poll_ms(Millis cap = Millis(1000LL * 3600)) const {
    return static_cast<int>(std::min(remaining(), cap).count());
  }
  Clock::time_point end() const { return end_; }

 private:
  Clock::time_point start_{};
  Clock::time_point end_{};
};

}  // namespace ddp
