// MpiWatchdog: the deadline of one blocking call at a time. No MPI: the watched "call" is a
// sleep or a wait here.
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
  std::this_thread::sleep_for(50ms);
  CHECK(fired == 0);
}

TEST_CASE("a call past its deadline: the action runs once, on another thread, before disarm returns") {
  MpiWatchdog w;
  std::atomic<int> fired{0};
  std::thread::id ran_on;
  w.arm(Clock::now() + 20ms, [&] {
    ran_on = std::this_thread::get_id();
    std::this_thread::sleep_for(50ms);  // disarm must wait for this
    ++fired;
  });
  std::this_thread::sleep_for(40ms);  // the "call" blocks past the deadline
  CHECK_FALSE(w.disarm());
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
