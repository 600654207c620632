#pragma once
// PathChooser: which way a hierarchical group's all_reduce goes above the small path's limit:
// split (reduce_scatter within the host, 1/L of the buffer across per rank, all_gather within
// the host) or flat (the group's own sockets between every rank, as DDP_TCP_TRANSPORT=socket).
//
// Split sends less between hosts (a host's L ranks each send 1/L, where a flat ring sends a
// share from every rank), but adds the two steps within the host. Where the link is the
// limit, split wins (up to 1.5x between 2 hosts: docs/tcp.md). Where it is not, flat can:
// between emulated hosts on one 16-CPU machine, whose "links" are memory copies too, 2 hosts x
// 2 ranks took 7.66 ms split and 6.93 flat at 16 MiB, 33.4 and 31.0 at 64 MiB, 135 and 138 at
// 256 MiB, where 1 MiB was 0.70 split against 1.17 flat. So it is measured while the job runs:
// - per size class (powers of two), ops go the way in use, and now and then two ops the other
//   way (a probe: the first finds the caches as the other way left them and is not counted);
//   the fourth and fifth ops of a class (the first op is cold and not counted either), then
//   after 8 ops, 16, ... at most 64 while the choice holds;
// - each rank times its own ops (wall time); the way in use is the least of its last
//   kRecent ops (a late peer makes one op slow, not four), the other is the probe's;
// - after a probe, the ranks sum their two figures by the small all_reduce (every rank gets
//   the same bits) and each switches only when the other way's sum is lower by kMargin.
// The schedule depends on nothing but the ops and those sums, so every rank runs each op the
// same way (a mismatch would be a hang: the two ways exchange different messages).
// DDP_TCP_HIERARCHY_LARGE=split|flat fixes the way (rank 0's value counts). Unless split, the
// group's own sockets open as many connections to each peer as a flat group's would. Called by
// one thread at a time.
#include <array>
#include <cstddef>
#include <cstdint>
#include <string>

namespace ddp::comm::tcp {

enum class LargeWay : uint8_t { kSplit = 0, kFlat = 1 };
enum class LargeSetting { kAuto, kSplit, kFlat };

// DDP_TCP_HIERARCHY_LARGE's value: auto, split or flat; InvalidArgument naming it otherwise.
LargeSetting parse_large_setting(const std::string& value);
const char* to_string(LargeWay way);
const char* to_string(LargeSetting setting);  // auto, split or flat

class PathChooser {
 public:
  static constexpr uint32_t kFirstInterval = 8;
  static constexpr uint32_t kMaxInterval = 64;
  static constexpr double kMargin = 1.15;  // the other way's sum must be lower by this much
  static constexpr size_t kRecent = 4;

  // Both figures of a decision: the way in use, the way probed (microseconds).
  using Figures = std::array<double, 2>;

  explicit PathChooser(LargeSetting setting = LargeSetting::kAuto);

  // The way for the next op of `bytes`.
  LargeWay next(size_t bytes);
  // That op took `us` on this rank. True when a probe just ended: the ranks must now sum
  // figures(bytes) and pass the sums to agree().
  bool record(size_t bytes, LargeWay way, double us);
  Figures figures(size_t bytes) const;
  // Every rank's figures summed: switches when the other way's sum is lower by kMargin. The
  // way ops of `bytes` take from now on.
  LargeWay agree(size_t bytes, const Figures& sums);
  LargeWay preferred(size_t bytes) const;

 private:
  static constexpr int kClasses = 40;
  struct SizeClass {
    LargeWay way = LargeWay::kSplit;
    std::array<double, kRecent> recent{};  // the way in use: its last ops' times (0: none)
    size_t recent_next = 0;
    double probe = 0;                    // the probe's counted op
    uint32_t until_probe = 3;            // ops before the next probe (the first is cold, not counted)
    uint32_t probing = 0;                // probe ops left to run
    bool warm = false;                   // the class's first op was seen (and not counted)
    uint32_t interval = kFirstInterval;  // the gap after the next probe
  };
  static size_t class_of(size_t bytes);
  static LargeWay other(LargeWay way) { return way == LargeWay::kSplit ? LargeWay::kFlat : LargeWay::kSplit; }

  LargeSetting setting_;
  std::array<SizeClass, kClasses> classes_{};
};

}  // namespace ddp::comm::tcp
