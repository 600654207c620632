// PathChooser: the setting's parse, fixed settings, and the auto policy as several ranks run it:
// split first, the fourth op of a size class probes flat (two ops, the first not counted), the
// ranks' summed figures decide for all of them (so they never part ways, whatever each one
// timed alone), a late peer's one slow op does not count against the way in use, losing probes
// come at doubling intervals up to the cap, and size classes learn apart.
#include "comm/tcp/hierarchy_choice.h"

#include <doctest/doctest.h>

#include <functional>
#include <string>
#include <vector>

#include "common/error.h"

using namespace ddp;
using namespace ddp::comm::tcp;

namespace {

constexpr size_t kMiB = 1 << 20;

// Ranks that run every op together, as a group does: each asks its chooser for the way (all
// must agree), times it (`us(rank, way)`), and when a probe ended, all sum their figures and
// agree. Returns the op's way.
struct Ranks {
  std::vector<PathChooser> choosers;
  int decisions = 0;
  explicit Ranks(int n, LargeSetting s = LargeSetting::kAuto)
      : choosers(static_cast<size_t>(n), PathChooser(s)) {}

  LargeWay op(size_t bytes, const std::function<double(int, LargeWay)>& us) {
    const LargeWay way = choosers[0].next(bytes);
    for (size_t r = 1; r < choosers.size(); ++r) CHECK(choosers[r].next(bytes) == way);
    int ended = 0;
    for (size_t r = 0; r < choosers.size(); ++r)
      ended += choosers[r].record(bytes, way, us(static_cast<int>(r), way)) ? 1 : 0;
    CHECK((ended == 0 || ended == static_cast<int>(choosers.size())));
    if (ended == 0) return way;
    PathChooser::Figures sums{};
    for (const auto& c : choosers) {
      const PathChooser::Figures f = c.figures(bytes);
      sums[0] += f[0];
      sums[1] += f[1];
    }
    ++decisions;
    const LargeWay agreed = choosers[0].agree(bytes, sums);
    for (size_t r = 1; r < choosers.size(); ++r) CHECK(choosers[r].agree(bytes, sums) == agreed);
    return way;
  }
  LargeWay op(size_t bytes, double split_us, double flat_us) {
    return op(bytes, [&](int, LargeWay w) { return w == LargeWay::kSplit ? split_us : flat_us; });
  }
};

}  // namespace

TEST_CASE("DDP_TCP_HIERARCHY_LARGE: auto, split or flat; anything else is refused by name") {
  CHECK(parse_large_setting("auto") == LargeSetting::kAuto);
  CHECK(parse_large_setting("split") == LargeSetting::kSplit);
  CHECK(parse_large_setting("flat") == LargeSetting::kFlat);
  CHECK_THROWS_WITH_AS(parse_large_setting("ring"), doctest::Contains("DDP_TCP_HIERARCHY_LARGE='ring'"),
                       InvalidArgument);
  CHECK_THROWS_AS(parse_large_setting(""), InvalidArgument);
  CHECK(std::string(to_string(LargeWay::kFlat)) == "flat");
  for (const char* name : {"auto", "split", "flat"})
    CHECK(std::string(to_string(parse_large_setting(name))) == name);
}

TEST_CASE("a fixed setting takes its way for every op and never asks the ranks to agree") {
  Ranks split(2, LargeSetting::kSplit), flat(2, LargeSetting::kFlat);
  for (int i = 0; i < 300; ++i) {
    CHECK(split.op(kMiB, 9.0, 1.0) == LargeWay::kSplit);
    CHECK(flat.op(kMiB, 1.0, 9.0) == LargeWay::kFlat);
  }
  CHECK(split.decisions == 0);
  CHECK(flat.decisions == 0);
  CHECK(flat.choosers[0].preferred(kMiB) == LargeWay::kFlat);
}

TEST_CASE("auto: split first; the fourth op probes flat twice, and a clear win switches every rank") {
  Ranks g(3);
  CHECK(g.choosers[0].preferred(kMiB) == LargeWay::kSplit);
  for (int i = 0; i < 3; ++i) CHECK(g.op(kMiB, 100.0, 50.0) == LargeWay::kSplit);
  CHECK(g.op(kMiB, 100.0, 50.0) == LargeWay::kFlat);  // the probe's first op: not counted
  CHECK(g.decisions == 0);
  CHECK(g.op(kMiB, 100.0, 50.0) == LargeWay::kFlat);  // its second: the ranks decide
  CHECK(g.decisions == 1);
  for (auto& c : g.choosers) CHECK(c.preferred(kMiB) == LargeWay::kFlat);
  // Flat from now on, until split is probed after kFirstInterval ops (and loses again).
  for (uint32_t i = 0; i < PathChooser::kFirstInterval; ++i)
    CHECK(g.op(kMiB, 100.0, 50.0) == LargeWay::kFlat);
  CHECK(g.op(kMiB, 100.0, 50.0) == LargeWay::kSplit);
  CHECK(g.op(kMiB, 100.0, 50.0) == LargeWay::kSplit);
  CHECK(g.decisions == 2);
  CHECK(g.choosers[1].preferred(kMiB) == LargeWay::kFlat);
}

TEST_CASE("auto: a win under the margin does not switch") {
  Ranks g(2);
  for (int i = 0; i < 5; ++i) g.op(kMiB, 100.0, 90.0);
  CHECK(g.decisions == 1);
  CHECK(g.choosers[0].preferred(kMiB) == LargeWay::kSplit);
}

TEST_CASE("auto: the ranks' sums decide, not what one rank saw, so no rank parts ways") {
  // Rank 0 finds flat four times faster; ranks 1 and 2 find it twice as slow: in all, split
  // wins (100 x 3 against 25 + 200 + 200), and every rank stays split.
  Ranks g(3);
  auto us = [](int rank, LargeWay w) {
    if (w == LargeWay::kSplit) return 100.0;
    return rank == 0 ? 25.0 : 200.0;
  };
  for (int i = 0; i < 40; ++i) g.op(kMiB, us);  // each op checks that the ranks agree
  for (auto& c : g.choosers) CHECK(c.preferred(kMiB) == LargeWay::kSplit);
  CHECK(g.decisions >= 2);
}

TEST_CASE("auto: a late peer's one slow op does not count against the way in use") {
  // Split takes 100 us, but one op of the last four took 1000 (a rank came late); flat 90:
  // the least of the recent ops (100) is what flat must beat by the margin, and it does not.
  Ranks g(2);
  int n = 0;
  auto us = [&](int, LargeWay w) { return w == LargeWay::kFlat ? 90.0 : (n == 2 ? 1000.0 : 100.0); };
  for (n = 0; n < 5; ++n) g.op(kMiB, us);
  CHECK(g.decisions == 1);
  CHECK(g.choosers[0].preferred(kMiB) == LargeWay::kSplit);
}

TEST_CASE("auto: probes that lose come at doubling intervals, capped") {
  Ranks g(2);
  std::vector<int> probes_at;
  for (int i = 0; i < 600; ++i) {
    if (g.op(kMiB, 100.0, 300.0) == LargeWay::kFlat) probes_at.push_back(i);
  }
  REQUIRE(probes_at.size() >= 10);
  for (size_t i = 0; i + 1 < probes_at.size(); i += 2) CHECK(probes_at[i + 1] == probes_at[i] + 1);
  CHECK(probes_at[0] == 3);
  CHECK(probes_at[2] - probes_at[1] == static_cast<int>(PathChooser::kFirstInterval) + 1);
  CHECK(probes_at[4] - probes_at[3] == 2 * static_cast<int>(PathChooser::kFirstInterval) + 1);
  const int last_gap = probes_at[probes_at.size() - 2] - probes_at[probes_at.size() - 3];
  CHECK(last_gap == static_cast<int>(PathChooser::kMaxInterval) + 1);
  CHECK(g.choosers[0].preferred(kMiB) == LargeWay::kSplit);
}

TEST_CASE("auto: size classes learn apart") {
  Ranks g(2);
  for (int i = 0; i < 5; ++i) g.op(kMiB, 100.0, 50.0);        // flat wins at 1 MiB
  for (int i = 0; i < 5; ++i) g.op(64 * kMiB, 100.0, 300.0);  // split at 64 MiB
  CHECK(g.choosers[0].preferred(kMiB) == LargeWay::kFlat);
  CHECK(g.choosers[0].preferred(64 * kMiB) == LargeWay::kSplit);
  CHECK(g.choosers[1].preferred(2 * kMiB) == LargeWay::kSplit);  // not measured yet
}
