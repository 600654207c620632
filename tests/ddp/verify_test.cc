#include "ddp/verify.h"

#include <doctest/doctest.h>

#include "common/error.h"
#include "tests/ddp/rank_threads.h"

using namespace ddp;
using ddp::testing::run_ranks;

TEST_CASE("identical descriptions pass; a difference is reported identically on every rank") {
  run_ranks(3, [&](int, comm::ProcessGroupPtr g) { verify_same_across_ranks(*g, {"a 1", "b 2"}, "check"); });
  std::vector<std::string> errors(4);
  run_ranks(4, [&](int rank, comm::ProcessGroupPtr g) {
    std::vector<std::string> lines{"a 1", rank % 2 ? "b 3" : "b 2", "c"};
    try {
      verify_same_across_ranks(*g, lines, "check");
    } catch (const InvalidArgument& e) {
      errors[rank] = e.message();
    }
  });
  for (const auto& e : errors) {
    CHECK(e == errors[0]);
    CHECK(e.find("entry 1 differs") != std::string::npos);
    CHECK(e.find("ranks [0, 2] have 'b 2'") != std::string::npos);
    CHECK(e.find("ranks [1, 3] have 'b 3'") != std::string::npos);
  }
}

TEST_CASE("fnv1a is stable") {
  CHECK(fnv1a("") == 1469598103934665603ull);
  CHECK(fnv1a("a") != fnv1a("b"));
}
