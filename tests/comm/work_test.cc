#include "comm/work.h"

#include <doctest/doctest.h>

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
