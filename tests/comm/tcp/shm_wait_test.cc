// ShmWait: a wait ends when its condition holds, and otherwise names what it waited for: the
// late ranks at the deadline, a peer that left, the group's recorded failure.
#include "comm/tcp/shm_wait.h"

#include <doctest/doctest.h>

#include <atomic>
#include <thread>

#include "common/error.h"
#include "tests/comm/tcp/shm_test_util.h"

using namespace ddp;
using namespace ddp::comm::tcp;
using namespace ddp::comm::tcp::testing;

namespace {
ShmWait::Options fast_policy(int rank, int world) { return {rank, world, 50, 1000}; }
}  // namespace

TEST_CASE(
    "spin_until: true at once when ready, false after the budget when never, true when it turns ready") {
  CHECK(spin_until([] { return true; }, [] { return false; }, 0, 0));
  CHECK_FALSE(spin_until([] { return false; }, [] { return false; }, 10, 0));
  CHECK_FALSE(spin_until([] { return false; }, [] { return true; }, 10, 2000));
  std::atomic<bool> flag{false};
  std::thread setter([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
    flag = true;
  });
  CHECK(spin_until([&] { return flag.load(); }, [] { return true; }, 100, 10'000'000));
  setter.join();
}

TEST_CASE("wait returns once a peer publishes, even after it went to sleep") {
  ShmRanks ranks(2);
  ShmWait waiter(&ranks.segments[0], fast_policy(0, 2), ranks.health[0].get());
  auto ctx = context({OpKind::kBarrier});
  std::thread peer([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(30));  // past the spin and yield budgets
    ranks.segments[1].publish(1, Counter::kStaged, 1);
  });
  auto& c = ranks.segments[0].counter(1, Counter::kStaged);
  waiter.wait([&] { return c.load() >= 1; }, [] { return std::vector<int>{1}; }, ctx);
  CHECK(c.load() == 1);
  peer.join();
}

TEST_CASE("a peer that never comes: TimeoutError naming the op, the timeout and the late ranks") {
  ShmRanks ranks(3);
  ShmWait waiter(&ranks.segments[0], fast_policy(0, 3), ranks.health[0].get());
  auto ctx = context({OpKind::kAllReduce, comm::DType::kFloat32, comm::ReduceOp::kSum, -1, 4, 7}, Millis(60));
  try {
    waiter.wait([] { return false; }, [] { return std::vector<int>{1, 2}; }, ctx);
    FAIL("no timeout");
  } catch (const TimeoutError& e) {
    const std::string m = e.message();
    CHECK(m.find("all_reduce (seq 7)") != std::string::npos);
    CHECK(m.find("60 ms") != std::string::npos);
    CHECK(m.find("ranks [1, 2]") != std::string::npos);
  }
}

TEST_CASE("a late peer that destroyed its group: NetworkError naming it, before the deadline") {
  ShmRanks ranks(2);
  ShmWait waiter(&ranks.segments[0], fast_policy(0, 2), ranks.health[0].get());
  ranks.health[0]->mark_departed(1);
  auto ctx = context({OpKind::kBarrier}, Millis(60000));
  const auto start = Clock::now();
  CHECK_THROWS_WITH_AS(waiter.wait([] { return false; }, [] { return std::vector<int>{1}; }, ctx),
                       doctest::Contains("rank 1 left the group"), NetworkError);
  CHECK(Clock::now() - start < std::chrono::seconds(30));
}

// The interleaving behind a flaky CI failure: we read the peer's counter (not there yet), then
// it publishes, finishes, destroys its group, and its goodbye arrives before we look at
// departures. It completed its part, so the wait must return, not blame it.
TEST_CASE("a peer that publishes, then leaves while we look at who is late: the wait returns") {
  ShmRanks ranks(2);
  ShmWait waiter(&ranks.segments[0], fast_policy(0, 2), ranks.health[0].get());
  auto ctx = context({OpKind::kBarrier}, Millis(60000));
  auto& c = ranks.segments[0].counter(1, Counter::kStaged);
  int asked = 0;
  auto missing = [&] {
    std::vector<int> late;
    if (c.load() < 1) late.push_back(1);
    if (++asked == 1) {  // between this read and the departure check, the peer finishes
      ranks.segments[1].publish(1, Counter::kStaged, 1);
      ranks.health[0]->mark_departed(1);
    }
    return late;
  };
  waiter.wait([&] { return c.load() >= 1; }, missing, ctx);
  CHECK(asked >= 1);
  CHECK(c.load() == 1);
}

TEST_CASE("a group already failed: the wait rethrows its failure") {
  ShmRanks ranks(2);
  ShmWait waiter(&ranks.segments[0], fast_policy(0, 2), ranks.health[0].get());
  ranks.health[0]->fail(FailureKind::kNetwork, 1, "rank 1 lost");
  auto ctx = context({OpKind::kBarrier});
  CHECK_THROWS_AS(waiter.wait([] { return false; }, [] { return std::vector<int>{1}; }, ctx), NetworkError);
}

TEST_CASE("crowded: true exactly when a peer last waited on this CPU, and this rank's CPU is published") {
  ShmRanks ranks(2);
  ShmWait waiter(&ranks.segments[0], fast_policy(0, 2), ranks.health[0].get());
  ranks.segments[0].control(1).cpu.store(-5);
  CHECK_FALSE(waiter.crowded());
  const int mine = ranks.segments[0].control(0).cpu.load();
  CHECK(mine >= 0);
  // The thread may migrate between reading its CPU and crowded(): a few tries see it settle.
  bool seen = false;
  for (int i = 0; i < 100 && !seen; ++i) {
    ranks.segments[0].control(1).cpu.store(sched_getcpu());
    seen = waiter.crowded();
  }
  CHECK(seen);
}
