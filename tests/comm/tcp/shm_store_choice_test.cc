// StoreChooser: the setting's parse, fixed settings, and the auto policy's schedule: the second
// op of a size class probes, a probe that wins by the margin switches, one that loses doubles
// the interval up to its cap, a mode that gets slower than the other's last figure is checked
// at once, and size classes learn apart.
#include "comm/tcp/shm_store_choice.h"

#include <doctest/doctest.h>

#include <string>
#include <vector>

#include "common/error.h"

using namespace ddp;
using namespace ddp::comm::tcp;
using std::chrono::nanoseconds;

namespace {

constexpr size_t kMiB = 1 << 20;

// Runs one op of `bytes` as the chooser says; its busy time is `ns_per_byte` of its mode.
StoreMode op(StoreChooser& c, size_t bytes, double cached_ns_per_byte, double streaming_ns_per_byte) {
  const StoreMode m = c.next(bytes);
  const double cost = m == StoreMode::kCached ? cached_ns_per_byte : streaming_ns_per_byte;
  c.record(bytes, m, nanoseconds(static_cast<int64_t>(cost * static_cast<double>(bytes))));
  return m;
}

}  // namespace

TEST_CASE("DDP_TCP_SHM_STORES: auto, cached or streaming; anything else is refused by name") {
  CHECK(parse_store_setting("auto") == StoreSetting::kAuto);
  CHECK(parse_store_setting("cached") == StoreSetting::kCached);
  CHECK(parse_store_setting("streaming") == StoreSetting::kStreaming);
  CHECK_THROWS_WITH_AS(parse_store_setting("nt"), doctest::Contains("DDP_TCP_SHM_STORES='nt'"),
                       InvalidArgument);
  CHECK_THROWS_AS(parse_store_setting(""), InvalidArgument);
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
  CHECK(op(c, kMiB, 4.0, 1.0) == StoreMode::kStreaming);  // the probe
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
  CHECK(c.preferred(kMiB) == StoreMode::kCached);
  StoreChooser d;
  for (int i = 0; i < 3; ++i) op(d, kMiB, 1.0, 1.0 / (StoreChooser::kMargin * 0.98));
  CHECK(d.preferred(kMiB) == StoreMode::kCached);
}

TEST_CASE("auto: a class's first op is cold and not counted: its slowness does not make the probe win") {
  StoreChooser c;
  CHECK(c.next(kMiB) == StoreMode::kCached);
  c.record(kMiB, StoreMode::kCached, nanoseconds(6 * kMiB));  // page faults: 6 ns a byte
  CHECK(op(c, kMiB, 1.0, 2.0) == StoreMode::kCached);         // warm: 1 ns a byte
  CHECK(op(c, kMiB, 1.0, 2.0) == StoreMode::kStreaming);      // the probe: 2 ns a byte, loses
  CHECK(c.preferred(kMiB) == StoreMode::kCached);
}

TEST_CASE("auto: probes that lose come at doubling intervals, capped") {
  StoreChooser c;
  std::vector<int> probes_at;
  for (int i = 0; i < 2000; ++i) {
    if (op(c, kMiB, 1.0, 3.0) == StoreMode::kStreaming) probes_at.push_back(i);
  }
  REQUIRE(probes_at.size() >= 6);
  CHECK(probes_at[0] == 2);
  CHECK(probes_at[1] - probes_at[0] == static_cast<int>(StoreChooser::kFirstInterval) + 1);
  CHECK(probes_at[2] - probes_at[1] == 2 * static_cast<int>(StoreChooser::kFirstInterval) + 1);
  const int last_gap = probes_at.back() - probes_at[probes_at.size() - 2];
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
