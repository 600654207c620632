#include "common/error.h"

#include <doctest/doctest.h>

using namespace ddp;

TEST_CASE("errors carry the message and file:line") {
  try {
    DDP_THROW(TimeoutError, "get(", "k", ") after ", 5, " ms");
    FAIL("not thrown");
  } catch (const TimeoutError& e) {
    CHECK(e.message() == "get(k) after 5 ms");
    CHECK(std::string(e.what()).find("error_test.cc:") != std::string::npos);
  }
}

TEST_CASE("the hierarchy is catchable as Error") {
  CHECK_THROWS_AS(DDP_THROW(NetworkError, "peer 3 lost"), Error);
  CHECK_THROWS_AS(DDP_THROW(StoreError, "x"), Error);
}

TEST_CASE("NotInitialized is an InvalidArgument that boundaries can tell apart by type") {
  CHECK_THROWS_AS(DDP_THROW(NotInitialized, "default_group: init_process_group was not called"),
                  InvalidArgument);
  CHECK_THROWS_AS(DDP_THROW(NotInitialized, "x"), NotInitialized);
}

TEST_CASE("check macros print both values") {
  int a = 3, b = 4;
  try {
    DDP_CHECK_EQ(a, b, "while testing");
    FAIL("not thrown");
  } catch (const InvalidArgument& e) {
    std::string m = e.message();
    CHECK(m.find("a == b") != std::string::npos);
    CHECK(m.find("3 vs 4") != std::string::npos);
    CHECK(m.find("while testing") != std::string::npos);
  }
  CHECK_NOTHROW(DDP_CHECK(a < b));
  CHECK_THROWS_AS(DDP_CHECK(a > b), InvalidArgument);
}

TEST_CASE("system errors carry errno and strerror") {
  errno = ENOENT;
  try {
    DDP_THROW_ERRNO("open(/nope)");
  } catch (const SystemError& e) {
    CHECK(e.code() == ENOENT);
    CHECK(e.message().find("No such file") != std::string::npos);
  }
}
