// StoreChooser: the setting's parse, fixed settings, and the auto policy's schedule: the third
// op of a size class probes (two ops, the first not counted), a probe that
// wins by the margin switches, one that loses doubles the interval up to its cap, a mode that
// gets slower than another's last figure is checked at once, and size classes learn apart.
// A third way (cross-memory) offered: probes take the others in turn, the cheapest wins; offered
// alone it is the only way; withdrawn, it is never chosen again.
#include "comm/tcp/shm_store_choice.h"

#include <doctest/doctest.h>

#include <string>
#include <vector>

#include "common/error.h"
#include "tests/common/settings_test_util.h"

using namespace ddp;
using namespace ddp::comm::tcp;
using std::chrono::nanoseconds;

namespace {

constexpr size_t kMiB = 1 << 20;

// Runs one op of `bytes` as the chooser says; its busy time is `ns_per_byte` of its mode.
StoreMode op(StoreChooser& c, size_t bytes, double cached_ns_per_byte, double streaming_ns_per_byte,
             double cross_ns_per_byte = 100.0) {
  const StoreMode m = c.next(bytes);
  const double cost = m == StoreMode::kCached      ? cached_ns_per_byte
                      : m == StoreMode::kStreaming ? streaming_ns_per_byte
                                                   : cross_ns_per_byte;
  c.record(bytes, m, nanoseconds(static_cast<int64_t>(cost * static_cast<double>(bytes))));
  return m;
}

}  // namespace

TEST_CASE("DDP_TCP_SHM_STORES: auto, cached or streaming; anything else is refused by name") {
  settings::testing::check_choice_as<StoreSetting>(settings::kTcpShmStores,
                                                   {{"auto", StoreSetting::kAuto},
                                                    {"cached", StoreSetting::kCached},
                                                    {"streaming", StoreSetting::kStreaming}});
  CHECK(std::string(to_string(StoreMode::kStreaming)) == "streaming");
}

TEST_CASE("a fixed setting is used for every op, whatever the times say") {
  StoreChooser cached(StoreSetting::kCached), streaming(StoreSetting::kStreaming);
  for (int i = 0; i < 300; ++i) {
    CHECK(op(cached, kMiB, 9.0, 1.0) == StoreMode::kCached);
    CHECK(op(streaming, kMiB, 1.0, 9.0) == StoreMode::kStreaming);
  }
  CHECK(cached.preferred(kMiB) == StoreMode::kCached);
  CHECK(streaming.preferred(kMiB) == StoreMode::kStreaming);
}

TEST_CASE("auto: cached first, the third op probes streaming, and a clear win switches") {
  StoreChooser c;
  CHECK(c.preferred(kMiB) == StoreMode::kCached);
  CHECK(op(c, kMiB, 4.0, 1.0) == StoreMode::kCached);
  CHECK(op(c, kMiB, 4.0, 1.0) == StoreMode::kCached);
  CHECK(op(c, kMiB, 4.0, 1.0) == StoreMode::kStreaming);  // the probe's first op: not counted
  CHECK(c.preferred(kMiB) == StoreMode::kCached);
  CHECK(op(c, kMiB, 4.0, 1.0) == StoreMode::kStreaming);  // so it runs again, and counts
  CHECK(c.preferred(kMiB) == StoreMode::kStreaming);
  // Then kFirstInterval ops the new way, and one probe of the old way, which loses.
  for (uint32_t i = 0; i < StoreChooser::kFirstInterval; ++i)
    CHECK(op(c, kMiB, 4.0, 1.0) == StoreMode::kStreaming);
  CHECK(op(c, kMiB, 4.0, 1.0) == StoreMode::kCached);
  CHECK(c.preferred(kMiB) == StoreMode::kStreaming);
}

TEST_CASE("auto: a tie, or a win under the margin, does not switch") {
  StoreChooser c;
  op(c, kMiB, 1.0, 1.0);
  op(c, kMiB, 1.0, 1.0);
  CHECK(op(c, kMiB, 1.0, 1.0) == StoreMode::kStreaming);
  CHECK(op(c, kMiB, 1.0, 1.0) == StoreMode::kStreaming);
  CHECK(c.preferred(kMiB) == StoreMode::kCached);
  StoreChooser d;
  for (int i = 0; i < 4; ++i) op(d, kMiB, 1.0, 1.0 / (StoreChooser::kMargin * 0.98));
  CHECK(d.preferred(kMiB) == StoreMode::kCached);
}

TEST_CASE("auto: a class's first op is cold and not counted: its slowness does not make the probe win") {
  StoreChooser c;
  CHECK(c.next(kMiB) == StoreMode::kCached);
  c.record(kMiB, StoreMode::kCached, nanoseconds(6 * kMiB));  // page faults: 6 ns a byte
  CHECK(op(c, kMiB, 1.0, 2.0) == StoreMode::kCached);         // warm: 1 ns a byte
  CHECK(op(c, kMiB, 1.0, 2.0) == StoreMode::kStreaming);      // the probe's first op: not counted
  CHECK(op(c, kMiB, 1.0, 2.0) == StoreMode::kStreaming);      // again: 2 ns a byte, loses
  CHECK(c.preferred(kMiB) == StoreMode::kCached);
}

TEST_CASE("auto: probes that lose come at doubling intervals, capped") {
  StoreChooser c;
  std::vector<int> probes_at;
  for (int i = 0; i < 2000; ++i) {
    if (op(c, kMiB, 1.0, 3.0) == StoreMode::kStreaming) probes_at.push_back(i);
  }
  // Each probe is two ops in a row (the first not counted); pairs at doubling gaps.
  REQUIRE(probes_at.size() >= 8);
  REQUIRE(probes_at.size() % 2 == 0);
  for (size_t i = 0; i + 1 < probes_at.size(); i += 2) CHECK(probes_at[i + 1] == probes_at[i] + 1);
  CHECK(probes_at[0] == 2);
  CHECK(probes_at[2] - probes_at[1] == static_cast<int>(StoreChooser::kFirstInterval) + 1);
  CHECK(probes_at[4] - probes_at[3] == 2 * static_cast<int>(StoreChooser::kFirstInterval) + 1);
  const int last_gap = probes_at[probes_at.size() - 2] - probes_at[probes_at.size() - 3];
  CHECK(last_gap == static_cast<int>(StoreChooser::kMaxInterval) + 1);
  CHECK(c.preferred(kMiB) == StoreMode::kCached);
}

TEST_CASE("auto: when the machine changes, the mode in use gets slower and the other is tried at once") {
  StoreChooser c;
  for (int i = 0; i < 500; ++i) op(c, kMiB, 1.0, 2.0);  // near cores: cached wins, probes are rare
  CHECK(c.preferred(kMiB) == StoreMode::kCached);
  // The peer moves far away: cached costs 7x, streaming 2x. Within a few ops: streaming.
  int ops = 0;
  while (c.preferred(kMiB) == StoreMode::kCached && ops < 10) {
    op(c, kMiB, 7.0, 2.0);
    ++ops;
  }
  CHECK(c.preferred(kMiB) == StoreMode::kStreaming);
  CHECK(ops <= 3);
  // And back: cached is tried again within the first interval, and wins.
  ops = 0;
  while (c.preferred(kMiB) == StoreMode::kStreaming && ops < 100) {
    op(c, kMiB, 1.0, 2.0);
    ++ops;
  }
  CHECK(c.preferred(kMiB) == StoreMode::kCached);
  CHECK(ops <= static_cast<int>(StoreChooser::kFirstInterval) + 2);
}

TEST_CASE("auto: size classes (powers of two) learn apart") {
  StoreChooser c;
  for (int i = 0; i < 20; ++i) {
    op(c, kMiB, 1.0, 3.0);         // 1 MiB: cached wins
    op(c, 64 * kMiB, 3.0, 1.0);    // 64 MiB: streaming wins
    op(c, kMiB + 4096, 1.0, 3.0);  // the same class as 1 MiB
  }
  CHECK(c.preferred(kMiB) == StoreMode::kCached);
  CHECK(c.preferred(kMiB + 4096) == StoreMode::kCached);
  CHECK(c.preferred(64 * kMiB) == StoreMode::kStreaming);
  CHECK(c.preferred(128 * kMiB) == StoreMode::kCached);  // never measured
}

TEST_CASE("three ways: probes take the other two in turn, and the cheapest wins") {
  StoreChooser c;
  c.offer(StoreMode::kCross);
  std::vector<StoreMode> probes;
  for (int i = 0; i < 40; ++i) {
    const StoreMode m = op(c, kMiB, 2.0, 3.0, 1.0);
    if (m != c.preferred(kMiB) || m == StoreMode::kCross) probes.push_back(m);
  }
  CHECK(c.preferred(kMiB) == StoreMode::kCross);
  REQUIRE(probes.size() >= 3);
  CHECK(probes[0] == StoreMode::kStreaming);  // cold, then again: loses
  CHECK(probes[1] == StoreMode::kStreaming);
  CHECK(probes[2] == StoreMode::kCross);  // then the third way
  // Where cross-memory loses, cached stays.
  StoreChooser d;
  d.offer(StoreMode::kCross);
  for (int i = 0; i < 200; ++i) op(d, kMiB, 1.0, 3.0, 2.0);
  CHECK(d.preferred(kMiB) == StoreMode::kCached);
}

TEST_CASE("offered alone, cross-memory is every op's way; withdrawn, cached stores take over for good") {
  StoreChooser c;
  c.offer(StoreMode::kCross, true);
  for (int i = 0; i < 100; ++i) CHECK(op(c, kMiB, 1.0, 1.0, 9.0) == StoreMode::kCross);
  c.withdraw(StoreMode::kCross);
  for (int i = 0; i < 100; ++i) CHECK(op(c, kMiB, 1.0, 1.0, 0.1) == StoreMode::kCached);
  // In auto, a class that had switched to it goes back to the first way, and never probes it.
  StoreChooser d;
  d.offer(StoreMode::kCross);
  for (int i = 0; i < 40; ++i) op(d, kMiB, 2.0, 3.0, 1.0);
  REQUIRE(d.preferred(kMiB) == StoreMode::kCross);
  d.withdraw(StoreMode::kCross);
  CHECK(d.preferred(kMiB) == StoreMode::kCached);
  for (int i = 0; i < 300; ++i) CHECK(op(d, kMiB, 2.0, 3.0, 0.1) != StoreMode::kCross);
  // Withdrawn between a probe's two ops: its second is not run.
  StoreChooser e;
  e.offer(StoreMode::kCross);
  StoreMode m = StoreMode::kCached;
  for (int i = 0; i < 40 && m != StoreMode::kCross; ++i) m = op(e, kMiB, 1.0, 3.0, 2.0);
  REQUIRE(m == StoreMode::kCross);  // the probe's first op
  e.withdraw(StoreMode::kCross);
  for (int i = 0; i < 300; ++i) CHECK(op(e, kMiB, 1.0, 3.0, 0.1) != StoreMode::kCross);
  CHECK(std::string(to_string(StoreMode::kCross)) == "cross-memory");
}
