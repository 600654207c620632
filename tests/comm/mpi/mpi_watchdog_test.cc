// MpiWatchdog: the deadline of one blocking call at a time. No MPI: the watched "call" is a
// wait here, for the watchdog's own action (never a sleep that hopes it has run).
#include "comm/mpi/mpi_watchdog.h"

#include <doctest/doctest.h>

#include <atomic>
#include <future>
#include <thread>

using namespace ddp;
using namespace ddp::comm::mpi_backend;
using namespace std::chrono_literals;

TEST_CASE("a call that beats its deadline: disarm says so and the action never runs") {
  MpiWatchdog w;
  std::atomic<int> fired{0};
  for (int i = 0; i < 100; ++i) {
    w.arm(Clock::now() + 10s, [&] { ++fired; });
    CHECK(w.disarm());
  }
  // A watch that does expire: once its action ran, the watchdog has been past the 100 above.
  std::promise<void> later;
  w.arm(Clock::now() + 1ms, [&] { later.set_value(); });
  later.get_future().wait();
  CHECK_FALSE(w.disarm());
  CHECK(fired == 0);
}

TEST_CASE("a call past its deadline: the action runs once, on another thread, before disarm returns") {
  MpiWatchdog w;
  std::atomic<int> fired{0};
  std::thread::id ran_on;
  std::promise<void> started, release;
  std::shared_future<void> released = release.get_future().share();
  w.arm(Clock::now() + 20ms, [&] {
    ran_on = std::this_thread::get_id();
    started.set_value();
    released.wait();  // disarm must wait for this
    ++fired;
  });
  started.get_future().wait();  // the "call" blocks past the deadline, until the action runs
  auto disarmed = std::async(std::launch::async, [&] { return w.disarm(); });
  // Still in the action: disarm has not returned (a disarm that does not wait fails here).
  CHECK(disarmed.wait_for(20ms) == std::future_status::timeout);
  release.set_value();
  CHECK_FALSE(disarmed.get());
  CHECK(fired == 1);
  CHECK(ran_on != std::this_thread::get_id());
  // Armed again, it watches the next call afresh.
  w.arm(Clock::now() + 10s, [&] { ++fired; });
  CHECK(w.disarm());
  CHECK(fired == 1);
}

TEST_CASE("an earlier deadline after a later one is still kept (the sleeping thread is woken)") {
  MpiWatchdog w;
  w.arm(Clock::now() + 60s, [] {});
  CHECK(w.disarm());
  std::promise<void> fired;
  auto f = fired.get_future();
  w.arm(Clock::now() + 20ms, [&] { fired.set_value(); });
  CHECK(f.wait_for(10s) == std::future_status::ready);
  CHECK_FALSE(w.disarm());
}

TEST_CASE("destroyed while armed: the action is dropped, nothing hangs") {
  std::atomic<int> fired{0};
  {
    MpiWatchdog w;
    w.arm(Clock::now() + 60s, [&] { ++fired; });
  }
  CHECK(fired == 0);
}
