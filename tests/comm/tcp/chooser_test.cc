// Chooser under both deciders: a forced way is every op's whatever the figures; auto switches
// when the way in use is clearly slower (by the ranks' summed figures, or by this rank's own at
// once), holds within the margin, probes at doubling intervals up to the cap, never parts ways
// between ranks whose sums agree, and honours same_below and withdraw.
#include "comm/tcp/chooser.h"

#include <doctest/doctest.h>

#include <array>
#include <vector>

using namespace ddp::comm::tcp;
using Way = Chooser::Way;

namespace {

constexpr size_t kBytes = 1 << 20;
constexpr std::array<Way, 3> kOrder = {0, 1, 2};
constexpr std::array<const char*, 3> kNames = {"a", "b", "c"};

// One op of kBytes as the chooser says, its figure cost[way]; a sum-of-ranks probe's end is
// decided with `ranks` ranks' figures summed (every rank alike here). Returns the way taken.
Way op(Chooser& c, const std::array<double, 3>& cost, int ranks = 2) {
  const Way w = c.next(kBytes);
  if (c.record(kBytes, w, cost[w])) {
    Chooser::Figures f = c.figures(kBytes);
    for (double& x : f) x *= ranks;
    c.decide(kBytes, f);
  }
  return w;
}

ChoicePolicy sum_policy() {
  ChoicePolicy p = kLargeWayPolicy;
  p.name = "test";
  return p;
}

}  // namespace

TEST_CASE("a forced way is taken by every op, whatever the figures, under both deciders") {
  for (const ChoicePolicy& p : {kLargeWayPolicy, kStorePolicy}) {
    Chooser c(p, kOrder, kNames);
    c.force(2);
    for (int i = 0; i < 300; ++i) CHECK(op(c, {1.0, 1.0, 50.0}) == 2);
    CHECK(c.preferred(kBytes) == 2);
    CHECK(c.preferred(64 * kBytes) == 2);
  }
}

TEST_CASE("sum of ranks: the first way until the first probe; a clear win switches, at the probe's end") {
  Chooser c(sum_policy(), kOrder, kNames);
  c.withdraw(2);
  std::vector<Way> taken;
  for (uint32_t i = 0; i < kLargeWayPolicy.first_probe; ++i) taken.push_back(op(c, {10.0, 2.0, 0.0}));
  CHECK(taken == std::vector<Way>(kLargeWayPolicy.first_probe, 0));
  // The probe: counted + 1 ops of way 1; nothing decided before its last.
  for (uint32_t i = 0; i <= kLargeWayPolicy.counted; ++i) {
    CHECK(c.preferred(kBytes) == 0);
    const Way w = c.next(kBytes);
    CHECK(w == 1);
    const bool ended = c.record(kBytes, w, 2.0);
    CHECK(ended == (i == kLargeWayPolicy.counted));
    if (ended) {
      const Chooser::Figures f = c.figures(kBytes);
      CHECK(f[0] == doctest::Approx(10.0));
      CHECK(f[1] == doctest::Approx(2.0));
      CHECK(c.decide(kBytes, {20.0, 4.0}) == 1);
    }
  }
  CHECK(c.preferred(kBytes) == 1);
  for (int i = 0; i < 100; ++i) op(c, {10.0, 2.0, 0.0});
  CHECK(c.preferred(kBytes) == 1);  // the old way's probes lose
}

TEST_CASE("sum of ranks: the sums decide, not one rank's figures; within the margin nothing switches") {
  Chooser c(sum_policy(), kOrder, kNames);
  c.withdraw(2);
  for (uint32_t i = 0; i < kLargeWayPolicy.first_probe; ++i) op(c, {5.0, 1.0, 0.0});
  bool ended = false;
  while (!ended) {
    const Way w = c.next(kBytes);
    ended = c.record(kBytes, w, w == 0 ? 5.0 : 1.0);
  }
  // This rank saw way 1 five times faster, but the other rank saw it much slower: the sums hold.
  CHECK(c.decide(kBytes, {5.0 + 5.0, 1.0 + 9.5}) == 0);
  CHECK(c.preferred(kBytes) == 0);
  // A sum lower, but under the margin: no switch either.
  Chooser d(sum_policy(), kOrder, kNames);
  d.withdraw(2);
  for (int i = 0; i < 200; ++i) op(d, {1.0, 1.0 / (kLargeWayPolicy.margin * 0.98), 0.0});
  CHECK(d.preferred(kBytes) == 0);
}

TEST_CASE("sum of ranks: probes that lose come at doubling intervals, capped") {
  Chooser c(sum_policy(), kOrder, kNames);
  c.withdraw(2);
  std::vector<int> starts;
  Way last = 0;
  for (int i = 0; i < 1500; ++i) {
    const Way w = op(c, {1.0, 3.0, 0.0});
    if (w == 1 && last == 0) starts.push_back(i);
    last = w;
  }
  REQUIRE(starts.size() >= 6);
  const int probe = static_cast<int>(kLargeWayPolicy.counted) + 1;
  CHECK(starts[0] == static_cast<int>(kLargeWayPolicy.first_probe));
  CHECK(starts[1] - starts[0] == probe + static_cast<int>(kLargeWayPolicy.first_interval));
  CHECK(starts[2] - starts[1] == probe + 2 * static_cast<int>(kLargeWayPolicy.first_interval));
  CHECK(starts.back() - starts[starts.size() - 2] == probe + static_cast<int>(kLargeWayPolicy.max_interval));
  CHECK(c.preferred(kBytes) == 0);
}

TEST_CASE("one rank decides: a clear win switches at the probe's end with no call to decide") {
  Chooser c(kStorePolicy, kOrder, kNames);
  c.withdraw(2);
  std::vector<Way> taken;
  for (int i = 0; i < 4; ++i) {
    const Way w = c.next(kBytes);
    CHECK_FALSE(c.record(kBytes, w, w == 0 ? 4.0 : 1.0));  // never asks the ranks
    taken.push_back(w);
  }
  CHECK(taken == std::vector<Way>{0, 0, 1, 1});  // the third op probes: one cold op, one counted
  CHECK(c.preferred(kBytes) == 1);
  // Way 1 gets slower than way 0's last figure: way 0 is probed at once, and wins back.
  int ops = 0;
  while (c.preferred(kBytes) == 1 && ops < 10) {
    const Way w = c.next(kBytes);
    c.record(kBytes, w, w == 0 ? 4.0 : 40.0);
    ++ops;
  }
  CHECK(c.preferred(kBytes) == 0);
  CHECK(ops <= 4);
}

TEST_CASE("three ways: probes take the others in turn; same_below merges ways for small classes") {
  Chooser c(sum_policy(), kOrder, kNames);
  std::vector<Way> probes;
  for (int i = 0; i < 60; ++i) {
    const Way w = op(c, {2.0, 3.0, 1.0});
    if (w != c.preferred(kBytes) && (probes.empty() || probes.back() != w)) probes.push_back(w);
  }
  CHECK(c.preferred(kBytes) == 2);
  REQUIRE(probes.size() >= 2);
  CHECK(probes[0] == 1);
  CHECK(probes[1] == 2);
  // Below 4 MiB way 2 is taken as way 0: a 1 MiB class weighs two ways, a 64 MiB one three.
  Chooser d(sum_policy(), kOrder, kNames);
  d.same_below(2, 4 * kBytes, 0);
  for (int i = 0; i < 200; ++i) CHECK(op(d, {2.0, 3.0, 1.0}) != 2);
  CHECK(d.preferred(kBytes) == 0);
  CHECK(d.preferred(64 * kBytes) == 0);
  for (int i = 0; i < 60; ++i) {
    const Way w = d.next(64 * kBytes);
    if (d.record(64 * kBytes, w, std::array{2.0, 3.0, 1.0}[w])) d.decide(64 * kBytes, d.figures(64 * kBytes));
  }
  CHECK(d.preferred(64 * kBytes) == 2);
}

TEST_CASE("withdrawn, a way is never taken again; a class that used it goes back to the first") {
  Chooser c(kStorePolicy, kOrder, kNames);
  for (int i = 0; i < 60; ++i) op(c, {2.0, 3.0, 1.0});
  REQUIRE(c.preferred(kBytes) == 2);
  c.withdraw(2);
  CHECK(c.preferred(kBytes) == 0);
  for (int i = 0; i < 300; ++i) CHECK(op(c, {2.0, 3.0, 0.1}) != 2);
  // Withdrawing every way leaves the order's first.
  Chooser d(kStorePolicy, kOrder, kNames);
  d.force(1);
  d.withdraw(1);
  for (int i = 0; i < 20; ++i) CHECK(op(d, {9.0, 1.0, 1.0}) == 0);
}
