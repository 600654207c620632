// The hierarchical all_reduce's small-path limit: DDP_TCP_HIERARCHY_SMALL_BYTES's parse, the
// threshold from measured differences, and the calibration itself over real child groups (four
// threads as ranks in two "hosts" of two): every rank gets the same limit, and all_reduces on
// both sides of it stay exact.
#include "comm/tcp/hierarchy_calibration.h"

#include <doctest/doctest.h>

#include <mutex>
#include <set>

#include "common/error.h"
#include "tests/comm/tcp/hierarchy_test_util.h"
#include "tests/common/settings_test_util.h"

using namespace ddp;
using namespace ddp::comm;
using namespace ddp::comm::tcp;
using ddp::comm::tcp::testing::run_hierarchy;

TEST_CASE(
    "DDP_TCP_HIERARCHY_SMALL_BYTES: auto (or unset), or a byte count; anything else is refused by name") {
  using settings::testing::SetEnv;
  const settings::Setting& s = settings::kTcpHierarchySmallBytes;
  for (const char* autos : {"auto", "Auto", ""}) {
    SetEnv env(s, autos);
    CHECK_FALSE(settings::auto_int(s).has_value());
  }
  for (const char* bytes : {"0", "65536"}) {
    SetEnv env(s, bytes);
    CHECK(settings::auto_int(s) == std::stoll(bytes));
  }
  for (const char* bad : {"64K", "-1", "lots", "12 ", "99999999999999999999999", "0x10"}) {
    CAPTURE(bad);
    SetEnv env(s, bad);
    CHECK_THROWS_WITH_AS(settings::auto_int(s),
                         doctest::Contains((std::string("DDP_TCP_HIERARCHY_SMALL_BYTES='") + bad +
                                            "': auto, or an integer of at least 0")
                                               .c_str()),
                         InvalidArgument);
  }
}

TEST_CASE("the threshold: where the small path saves the most in all") {
  const std::vector<size_t> sizes = {4096, 8192, 16384, 32768};
  CHECK(small_bytes_from(sizes, {-5, -3, -1, -0.5}) == 32768);  // small wins throughout
  CHECK(small_bytes_from(sizes, {-5, -3, 2, 4}) == 8192);       // the crossover
  CHECK(small_bytes_from(sizes, {-5, 3, -1, 4}) == 4096);       // -5 alone beats -5 + 3 - 1
  CHECK(small_bytes_from(sizes, {-5, 1, -4, 9}) == 16384);      // one noisy size does not stop it
  CHECK(small_bytes_from(sizes, {0, 0, 1, 1}) == 8192);         // a tie keeps the small path
  CHECK(small_bytes_from(sizes, {2, -1, -0.5, 4}) == 2048);     // split wins from the first size
}

TEST_CASE("calibration over real child groups: every rank gets the same limit; all_reduces stay exact") {
  std::mutex mu;
  std::set<size_t> limits;
  run_hierarchy(OverlapSetting::kOff, [&](HierarchicalCollectives& h, int r) {
    const size_t limit = calibrate_small_bytes(h, "world", Millis(60'000));
    if (h.small_bytes() != limit) throw std::runtime_error("the limit was not set");
    {
      std::lock_guard<std::mutex> lock(mu);
      limits.insert(limit);
    }
    // Just under, at and over the limit (and a size with a tail: n % 2 == 1).
    for (size_t bytes : {limit, limit + 4, limit * 2 + 4}) {
      std::vector<float> v(std::max<size_t>(bytes / 4, 1));
      for (size_t i = 0; i < v.size(); ++i) v[i] = static_cast<float>(r + 1) + static_cast<float>(i % 5);
      OpContext ctx;
      static const std::string name = "world";
      ctx.desc = {OpKind::kAllReduce, DType::kFloat32, ReduceOp::kSum, -1, v.size(), 0};
      ctx.group = &name;
      ctx.timeout = Millis(60'000);
      ctx.deadline = Deadline(ctx.timeout);
      const Buffer b{v.data(), v.size(), DType::kFloat32, {}};
      h.run(ctx, b, b);
      for (size_t i = 0; i < v.size(); ++i) {
        if (v[i] != 10.0F + 4.0F * static_cast<float>(i % 5))
          throw std::runtime_error("wrong sum at " + std::to_string(i) + " of " + std::to_string(v.size()));
      }
    }
  });
  REQUIRE(limits.size() == 1);
  const size_t limit = *limits.begin();
  const bool known =
      limit == kCalibrationSizes.front() / 2 ||
      std::find(kCalibrationSizes.begin(), kCalibrationSizes.end(), limit) != kCalibrationSizes.end();
  CHECK(known);
}
