#include "common/task_thread.h"

#include <doctest/doctest.h>

#include <atomic>
#include <chrono>
#include <future>
#include <stdexcept>
#include <thread>
#include <vector>

using ddp::TaskThread;

TEST_CASE("tasks run in the order they were posted, on one thread other than the poster's") {
  std::vector<int> order;
  std::vector<std::thread::id> ids;
  std::promise<void> last;
  {
    TaskThread t;
    for (int i = 0; i < 100; ++i) {
      t.post([&, i] {
        order.push_back(i);
        ids.push_back(std::this_thread::get_id());
      });
    }
    t.post([&] { last.set_value(); });
    last.get_future().wait();
  }
  REQUIRE(order.size() == 100);
  for (int i = 0; i < 100; ++i) CHECK(order[static_cast<size_t>(i)] == i);
  for (auto id : ids) CHECK(id == ids.front());
  CHECK(ids.front() != std::this_thread::get_id());
}

TEST_CASE("a task may post more tasks; the destructor runs everything queued, then joins") {
  std::atomic<int> ran = 0;
  {
    TaskThread t;
    t.post([&] {
      std::this_thread::sleep_for(std::chrono::milliseconds(20));  // the rest queue up behind it
      ++ran;
      t.post([&] { ++ran; });
    });
    for (int i = 0; i < 10; ++i) t.post([&] { ++ran; });
  }
  CHECK(ran == 12);
}

TEST_CASE("posting from several threads at once loses nothing") {
  std::atomic<int> ran = 0;
  {
    TaskThread t;
    std::vector<std::thread> posters;
    for (int p = 0; p < 4; ++p) {
      posters.emplace_back([&] {
        for (int i = 0; i < 1000; ++i) t.post([&] { ++ran; });
      });
    }
    for (auto& p : posters) p.join();
  }
  CHECK(ran == 4000);
}

TEST_CASE("a task that throws (a bug) is logged; the thread goes on with the next") {
  std::atomic<int> ran = 0;
  {
    TaskThread t;
    t.post([] { throw std::runtime_error("boom"); });
    t.post([&] { ++ran; });
  }
  CHECK(ran == 1);
}

TEST_CASE("pending counts queued and running tasks, down to zero once they are done") {
  TaskThread t;
  CHECK(t.pending() == 0);
  std::promise<void> release;
  std::shared_future<void> gate = release.get_future().share();
  std::promise<void> started;
  t.post([&, gate] {
    started.set_value();
    gate.wait();
  });
  t.post([] {});
  started.get_future().wait();
  CHECK(t.pending() == 2);  // one running, one queued
  release.set_value();
  std::promise<void> last;
  t.post([&] { last.set_value(); });
  last.get_future().wait();
  // The task that set `last` may still be counted for a moment: wait for it to retire.
  while (t.pending() != 0) std::this_thread::yield();
  CHECK(t.pending() == 0);
}
