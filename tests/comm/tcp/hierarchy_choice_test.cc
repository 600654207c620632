// PathChooser: the settings' parse, the ways they allow, fixed ways, and the auto policy as
// several ranks run it: the first way first, the fifth op of a size class probes another
// (kProbeOps ops, the first not counted), the ranks' summed figures decide for all of them (so
// they never part ways, whatever each one timed alone), both ways' figures are the least of as
// many ops (a late peer's one slow op counts against neither), losing probes come at doubling
// intervals up to the cap, size classes learn apart, three ways are probed in turn, and
// overlapped is split below its least size.
#include "comm/tcp/hierarchy_choice.h"

#include <doctest/doctest.h>

#include <functional>
#include <map>
#include <string>
#include <vector>

#include "common/error.h"
#include "tests/common/settings_test_util.h"

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
  explicit Ranks(int n, std::vector<LargeWay> ways = {LargeWay::kSplit, LargeWay::kFlat},
                 size_t overlap_from = 0)
      : choosers(static_cast<size_t>(n), PathChooser(std::move(ways), overlap_from)) {}

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

// Ops of one size class until the first decision.
void until_decided(Ranks& g, const std::function<double(int, LargeWay)>& us) {
  for (int i = 0; i < 20 && g.decisions == 0; ++i) g.op(kMiB, us);
  REQUIRE(g.decisions == 1);
}

}  // namespace

TEST_CASE(
    "DDP_TCP_HIERARCHY_LARGE reads as LargeSetting: auto, split or flat; anything else is refused by name") {
  settings::testing::check_choice_as<LargeSetting>(
      settings::kTcpHierarchyLarge,
      {{"auto", LargeSetting::kAuto}, {"split", LargeSetting::kSplit}, {"flat", LargeSetting::kFlat}});
  CHECK(std::string(to_string(LargeWay::kFlat)) == "flat");
}

TEST_CASE("DDP_TCP_HIERARCHY_OVERLAP: auto (or unset) or a boolean; anything else is refused by name") {
  using settings::testing::SetEnv;
  const settings::Setting& s = settings::kTcpHierarchyOverlap;
  for (const char* on : {"1", "true", "On", "yes"}) {
    SetEnv env(s, on);
    CHECK(overlap_setting() == OverlapSetting::kOn);
  }
  for (const char* off : {"0", "false", "OFF", "no"}) {
    SetEnv env(s, off);
    CHECK(overlap_setting() == OverlapSetting::kOff);
  }
  for (const char* autos : {"auto", "AUTO", ""}) {
    SetEnv env(s, autos);
    CHECK(overlap_setting() == OverlapSetting::kAuto);
  }
  for (const char* bad : {"2", "maybe", " 1"}) {
    CAPTURE(bad);
    SetEnv env(s, bad);
    CHECK_THROWS_WITH_AS(overlap_setting(), doctest::Contains("DDP_TCP_HIERARCHY_OVERLAP"), InvalidArgument);
  }
  CHECK(std::string(to_string(LargeWay::kOverlapped)) == "overlapped");
}

TEST_CASE("auto starts overlapped where each rank on the host has a CPU") {
  CHECK(overlap_first(16, 2));
  CHECK(overlap_first(2, 2));
  CHECK_FALSE(overlap_first(2, 3));
  CHECK_FALSE(overlap_first(7, 8));
  CHECK(overlap_first(1, 0));        // an unknown count is one rank
  CHECK_FALSE(overlap_first(0, 1));  // CPUs unknown: in turn
}

TEST_CASE("the ways the settings allow, the first where auto starts; without flat sockets, no flat") {
  using W = std::vector<LargeWay>;
  const LargeWay s = LargeWay::kSplit, o = LargeWay::kOverlapped, f = LargeWay::kFlat;
  auto ways = [](LargeSetting l, OverlapSetting ov, bool first, bool flat) {
    return WayPolicy{l, ov, first}.ways(flat);
  };
  CHECK(ways(LargeSetting::kAuto, OverlapSetting::kAuto, false, true) == W{s, o, f});
  CHECK(ways(LargeSetting::kAuto, OverlapSetting::kAuto, true, true) == W{o, s, f});
  CHECK(ways(LargeSetting::kAuto, OverlapSetting::kOn, false, true) == W{o, f});
  CHECK(ways(LargeSetting::kAuto, OverlapSetting::kOff, true, true) == W{s, f});
  CHECK(ways(LargeSetting::kSplit, OverlapSetting::kAuto, true, true) == W{o, s});
  CHECK(ways(LargeSetting::kSplit, OverlapSetting::kOff, true, true) == W{s});
  CHECK(ways(LargeSetting::kFlat, OverlapSetting::kAuto, true, true) == W{f});
  CHECK(ways(LargeSetting::kFlat, OverlapSetting::kOn, false, false) == W{o});
  CHECK(ways(LargeSetting::kAuto, OverlapSetting::kAuto, false, false) == W{s, o});
  CHECK_THROWS_AS(PathChooser(W{}), InvalidArgument);
}

TEST_CASE("a fixed way is taken for every op and the ranks are never asked to agree") {
  Ranks split(2, {LargeWay::kSplit}), flat(2, {LargeWay::kFlat});
  for (int i = 0; i < 300; ++i) {
    CHECK(split.op(kMiB, 9.0, 1.0) == LargeWay::kSplit);
    CHECK(flat.op(kMiB, 1.0, 9.0) == LargeWay::kFlat);
  }
  CHECK(split.decisions == 0);
  CHECK(flat.decisions == 0);
  CHECK(flat.choosers[0].preferred(kMiB) == LargeWay::kFlat);
}

TEST_CASE("three ways: the probes take the other two in turn, and the fastest wins wherever it started") {
  // Overlapped first (a CPU per rank); split is slower, flat slower still, then overlapped
  // is the slowest: the probes find split, then keep probing both others.
  const std::vector<LargeWay> three{LargeWay::kOverlapped, LargeWay::kSplit, LargeWay::kFlat};
  Ranks g(2, three);
  std::map<LargeWay, double> us{
      {LargeWay::kOverlapped, 300.0}, {LargeWay::kSplit, 100.0}, {LargeWay::kFlat, 200.0}};
  auto time = [&](int, LargeWay w) { return us[w]; };
  std::vector<LargeWay> probed;
  for (int i = 0; i < 200; ++i) {
    const int before = g.decisions;
    g.op(kMiB, time);
    if (g.decisions > before) probed.push_back(g.choosers[0].probed(kMiB));
  }
  REQUIRE(probed.size() >= 4);
  CHECK(probed[0] == LargeWay::kSplit);  // the first other way: split wins at once
  CHECK(g.choosers[0].preferred(kMiB) == LargeWay::kSplit);
  CHECK(g.choosers[1].preferred(kMiB) == LargeWay::kSplit);
  // From split, overlapped and flat are probed in turn.
  for (size_t i = 1; i + 1 < probed.size(); ++i) CHECK(probed[i] != probed[i + 1]);
  for (size_t i = 1; i < probed.size(); ++i) CHECK(probed[i] != LargeWay::kSplit);
  // Later the link binds: overlapped becomes the fastest, and the next probe of it switches.
  us[LargeWay::kOverlapped] = 50.0;
  for (int i = 0; i < 300; ++i) g.op(kMiB, time);
  CHECK(g.choosers[0].preferred(kMiB) == LargeWay::kOverlapped);
}

TEST_CASE("overlapped below its least size (one segment) is split: two ways there, three above") {
  const std::vector<LargeWay> three{LargeWay::kOverlapped, LargeWay::kSplit, LargeWay::kFlat};
  Ranks g(2, three, 8 * kMiB);
  CHECK(g.choosers[0].preferred(4 * kMiB) == LargeWay::kSplit);  // the class [4, 8) MiB
  CHECK(g.choosers[0].preferred(8 * kMiB) == LargeWay::kOverlapped);
  std::map<LargeWay, int> small, large;
  for (int i = 0; i < 200; ++i) {
    ++small[g.op(5 * kMiB, 100.0, 100.0)];
    ++large[g.op(9 * kMiB, 100.0, 100.0)];
  }
  CHECK(small.count(LargeWay::kOverlapped) == 0);
  CHECK(small[LargeWay::kFlat] > 0);
  CHECK(large[LargeWay::kSplit] > 0);
  CHECK(large[LargeWay::kFlat] > 0);
  CHECK(large[LargeWay::kOverlapped] > large[LargeWay::kSplit]);  // the way in use
}

TEST_CASE("auto: split first; the fifth op starts a probe of flat, and a clear win switches every rank") {
  Ranks g(3);
  CHECK(g.choosers[0].preferred(kMiB) == LargeWay::kSplit);
  for (uint32_t i = 0; i < PathChooser::kCounted + 1; ++i) CHECK(g.op(kMiB, 100.0, 50.0) == LargeWay::kSplit);
  for (uint32_t i = 0; i + 1 < PathChooser::kProbeOps; ++i) {
    CHECK(g.op(kMiB, 100.0, 50.0) == LargeWay::kFlat);  // the first is not counted
    CHECK(g.decisions == 0);
  }
  CHECK(g.op(kMiB, 100.0, 50.0) == LargeWay::kFlat);  // its last: the ranks decide
  CHECK(g.decisions == 1);
  for (auto& c : g.choosers) CHECK(c.preferred(kMiB) == LargeWay::kFlat);
  // Flat from now on, until split is probed after kFirstInterval ops (and loses again).
  for (uint32_t i = 0; i < PathChooser::kFirstInterval; ++i)
    CHECK(g.op(kMiB, 100.0, 50.0) == LargeWay::kFlat);
  for (uint32_t i = 0; i < PathChooser::kProbeOps; ++i) CHECK(g.op(kMiB, 100.0, 50.0) == LargeWay::kSplit);
  CHECK(g.decisions == 2);
  CHECK(g.choosers[1].preferred(kMiB) == LargeWay::kFlat);
}

TEST_CASE("auto: a win under the margin does not switch") {
  Ranks g(2);
  until_decided(g, [](int, LargeWay w) { return w == LargeWay::kSplit ? 100.0 : 90.0; });
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
  // Split takes 100 us, but one of its counted ops took 1000 (a rank came late); flat 90: the
  // least of split's ops (100) is what flat must beat by the margin, and it does not.
  Ranks g(2);
  int n = 0;
  until_decided(g,
                [&](int, LargeWay w) { return w == LargeWay::kFlat ? 90.0 : (n++ == 4 ? 1000.0 : 100.0); });
  CHECK(g.choosers[0].preferred(kMiB) == LargeWay::kSplit);
}

TEST_CASE("auto: the probed way's figure is the least of its counted ops, as the way in use's is") {
  // Flat is faster at its best (80 against split's 100) but its ops vary: of the probe's, the
  // first (cold, not counted) and the last are slow. Figured from its last op alone, flat
  // would lose; from the least of its counted ops, as split is figured, it wins.
  Ranks g(2);
  uint32_t probe_op = 0;
  until_decided(g, [&](int rank, LargeWay w) {
    if (w == LargeWay::kSplit) return 100.0;
    const uint32_t i = probe_op;
    if (rank == 1) ++probe_op;
    return i == 1 ? 80.0 : 150.0;
  });
  CHECK(probe_op == PathChooser::kProbeOps);
  CHECK(g.choosers[0].preferred(kMiB) == LargeWay::kFlat);
  CHECK(g.choosers[1].preferred(kMiB) == LargeWay::kFlat);
}

TEST_CASE("auto: probes that lose come at doubling intervals, capped") {
  Ranks g(2);
  std::vector<int> starts;  // where each probe began, and how many ops it ran
  std::vector<int> lengths;
  LargeWay last = LargeWay::kSplit;
  for (int i = 0; i < 800; ++i) {
    const LargeWay w = g.op(kMiB, 100.0, 300.0);
    if (w == LargeWay::kFlat && last != LargeWay::kFlat) {
      starts.push_back(i);
      lengths.push_back(0);
    }
    if (w == LargeWay::kFlat) ++lengths.back();
    last = w;
  }
  REQUIRE(starts.size() >= 6);
  for (int len : lengths) CHECK(len == static_cast<int>(PathChooser::kProbeOps));
  const int probe = static_cast<int>(PathChooser::kProbeOps);
  const int first = static_cast<int>(PathChooser::kFirstInterval);
  CHECK(starts[0] == static_cast<int>(PathChooser::kCounted) + 1);
  CHECK(starts[1] - starts[0] == probe + first);
  CHECK(starts[2] - starts[1] == probe + 2 * first);
  CHECK(starts.back() - starts[starts.size() - 2] == probe + static_cast<int>(PathChooser::kMaxInterval));
  CHECK(g.choosers[0].preferred(kMiB) == LargeWay::kSplit);
}

TEST_CASE("auto: size classes learn apart") {
  Ranks g(2);
  for (int i = 0; i < 8; ++i) g.op(kMiB, 100.0, 50.0);        // flat wins at 1 MiB
  for (int i = 0; i < 8; ++i) g.op(64 * kMiB, 100.0, 300.0);  // split at 64 MiB
  CHECK(g.choosers[0].preferred(kMiB) == LargeWay::kFlat);
  CHECK(g.choosers[0].preferred(64 * kMiB) == LargeWay::kSplit);
  CHECK(g.choosers[1].preferred(2 * kMiB) == LargeWay::kSplit);  // not measured yet
}
