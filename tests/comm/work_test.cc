#include "comm/work.h"

#include <doctest/doctest.h>

#include <atomic>
#include <thread>

#include "common/error.h"

using namespace ddp;
using namespace ddp::comm;

TEST_CASE("Work completes, rethrows, and times out") {
  auto ok = std::make_shared<Work>("all_reduce #1");
  CHECK_FALSE(ok->is_completed());
  CHECK_THROWS_AS(ok->wait(Millis(10)), TimeoutError);
  int called = 0;
  ok->then([&](Work&) { ++called; });
  std::thread t([&] { ok->finish(); });
  CHECK(ok->wait(Millis(5000)));
  t.join();
  CHECK(called == 1);
  CHECK(ok->is_success());

  auto bad = std::make_shared<Work>("broadcast #2");
  bad->finish(std::make_exception_ptr(NetworkError("peer 1 lost", __FILE__, __LINE__)));
  CHECK_THROWS_AS(bad->wait(), NetworkError);
  CHECK(bad->exception() != nullptr);
  CHECK_THROWS_AS(wait_all({ok, bad}), NetworkError);
}

namespace {

// Records the blocking() calls a backend would see.
class ObservedWork final : public Work {
 public:
  ObservedWork() : Work("observed") {}
  std::atomic<int> begins{0}, ends{0}, blocked_while_finishing{-1};

 protected:
  void blocking(bool begin) noexcept override { (begin ? begins : ends).fetch_add(1); }
};

}  // namespace

TEST_CASE("Work tells its backend when a thread blocks in wait, and when it stops") {
  SUBCASE("a completed op: no blocking") {
    ObservedWork w;
    w.finish();
    CHECK(w.wait());
    CHECK(w.begins == 0);
    CHECK(w.ends == 0);
  }
  SUBCASE("a pending op: begin while blocked, end after, once each") {
    ObservedWork w;
    std::thread finisher([&] {
      while (w.begins.load() == 0) std::this_thread::yield();
      w.blocked_while_finishing = w.begins - w.ends;  // 1: the waiter is blocked right now
      w.finish();
    });
    CHECK(w.wait());
    finisher.join();
    CHECK(w.blocked_while_finishing == 1);
    CHECK(w.begins == 1);
    CHECK(w.ends == 1);
  }
  SUBCASE("a wait that times out still ends its blocking") {
    ObservedWork w;
    CHECK_THROWS_AS(w.wait(Millis(1)), TimeoutError);
    CHECK(w.begins == 1);
    CHECK(w.ends == 1);
  }
}

TEST_CASE("A Work that polls before sleeping sees completion, errors and its wait's timeout") {
  constexpr std::chrono::hours kForever{24};
  SUBCASE("finished by another thread while the waiter polls") {
    PollingWork w("polling", kForever);
    std::thread finisher([&] { w.finish(); });
    CHECK(w.wait());
    finisher.join();
  }
  SUBCASE("an error is rethrown") {
    PollingWork w("polling", kForever);
    std::thread finisher(
        [&] { w.finish(std::make_exception_ptr(NetworkError("lost", __FILE__, __LINE__))); });
    CHECK_THROWS_AS(w.wait(), NetworkError);
    finisher.join();
  }
  SUBCASE("a wait's timeout bounds the poll (a day's poll budget would hang this test)") {
    PollingWork w("polling", kForever);
    CHECK_THROWS_AS(w.wait(Millis(1)), TimeoutError);
    CHECK_FALSE(w.is_completed());
  }
  SUBCASE("a poll budget shorter than the op: the waiter sleeps and is woken") {
    PollingWork w("polling", std::chrono::microseconds(1));
    std::thread finisher([&] {
      std::this_thread::sleep_for(Millis(20));
      w.finish();
    });
    CHECK(w.wait());
    finisher.join();
  }
}

namespace {

// A backend whose waiter makes its op's progress itself (drive).
class DrivenWork final : public Work {
 public:
  DrivenWork() : Work("driven") {}
  std::atomic<int> drives{0};
  Clock::time_point until{};
  bool finish_when_driven = true;

 protected:
  void drive(Clock::time_point u) noexcept override {
    ++drives;
    until = u;
    if (finish_when_driven) finish();
  }
};

}  // namespace

TEST_CASE("Work lets its waiter drive the op, bounded by the wait's timeout") {
  SUBCASE("a completed op is not driven") {
    DrivenWork w;
    w.finish();
    CHECK(w.wait());
    CHECK(w.drives == 0);
  }
  SUBCASE("an unbounded wait: driven without a bound, and done by it") {
    DrivenWork w;
    CHECK(w.wait());
    CHECK(w.drives == 1);
    CHECK(w.until == Clock::time_point::max());
  }
  SUBCASE("a bounded wait: driven until its timeout; the timeout still counts from the call") {
    DrivenWork w;
    w.finish_when_driven = false;
    const auto before = Clock::now();
    CHECK_THROWS_AS(w.wait(Millis(50)), TimeoutError);
    const auto after = Clock::now();
    CHECK(w.drives == 1);
    CHECK(w.until >= before + Millis(50));
    CHECK(w.until <= after);
  }
}

TEST_CASE("chain_work runs the continuation, and carries errors") {
  auto inner = std::make_shared<Work>("inner");
  int ran = 0;
  auto outer = chain_work(
      inner, [&] { ++ran; }, "outer");
  CHECK_FALSE(outer->is_completed());
  inner->finish();
  CHECK(outer->wait());
  CHECK(ran == 1);

  auto failing = std::make_shared<Work>("inner");
  auto outer2 = chain_work(
      failing, [&] { ++ran; }, "outer");
  failing->finish(std::make_exception_ptr(TimeoutError("late", __FILE__, __LINE__)));
  CHECK_THROWS_AS(outer2->wait(), TimeoutError);
  CHECK(ran == 1);

  auto ok = std::make_shared<Work>("inner");
  auto outer3 = chain_work(
      ok, [] { DDP_THROW(InvalidArgument, "bad"); }, "outer");
  ok->finish();
  CHECK_THROWS_AS(outer3->wait(), InvalidArgument);
}
