#pragma once
// PathChooser: which way a hierarchical group's all_reduce goes above the small path's limit:
// split (reduce_scatter within the host, 1/L of the buffer across per rank, all_gather within),
// overlapped (the same steps, those within the host on a second thread, segment by segment:
// hierarchical_collectives.h), or flat (the group's own sockets between every rank). Split sends
// less between hosts but adds the steps within; overlapping pays where the link binds and costs
// where the CPUs do: so the way is measured while the job runs. Per size class, ops go the way in
// use and now and then kProbeOps go another (from the fifth op of a class, then after 8, 16, ...
// at most 64 ops; the first op of each is cold, not counted). Each rank times its own ops, both
// ways getting the least of kCounted ops; the ranks sum their figures by the small all_reduce and
// switch only when the other way's sum is lower by kMargin (idle connections restart slow). The
// schedule depends only on the ops and those sums, so every rank runs each op the same way.
// DDP_TCP_HIERARCHY_LARGE and DDP_TCP_HIERARCHY_OVERLAP fix ways. Called by one thread at a time.
#include <array>
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace ddp::comm::tcp {

enum class LargeWay : uint8_t { kSplit = 0, kFlat = 1, kOverlapped = 2 };
enum class LargeSetting : uint8_t { kAuto, kSplit, kFlat };
enum class OverlapSetting : uint8_t { kAuto, kOn, kOff };

// DDP_TCP_HIERARCHY_LARGE's value: auto, split or flat; InvalidArgument naming it otherwise.
LargeSetting parse_large_setting(const std::string& value);
// DDP_TCP_HIERARCHY_OVERLAP's value: auto, or a boolean (1/0, true/false, on/off, yes/no);
// InvalidArgument naming it otherwise.
OverlapSetting parse_overlap_setting(const std::string& value);
const char* to_string(LargeWay way);  // split, flat or overlapped

// Where `auto` starts before anything is measured: overlapped where each of the job's ranks on
// the host has a CPU of its own (cpus >= ranks_here; an unknown count of ranks is one), where
// it most often pays; else in turn.
bool overlap_first(int cpus, int ranks_here);

// A hierarchical group's settings for its large all_reduces (agreed; where auto starts: rank 0's).
struct WayPolicy {
  LargeSetting large = LargeSetting::kAuto;
  OverlapSetting overlap = OverlapSetting::kAuto;
  bool overlap_first = false;
  // The ways the settings allow, the first where every size class starts. Without flat
  // sockets (`flat` false) large is split.
  std::vector<LargeWay> ways(bool flat) const;
};

class PathChooser {
 public:
  static constexpr uint32_t kFirstInterval = 8;
  static constexpr uint32_t kMaxInterval = 64;
  static constexpr double kMargin = 1.15;  // the probed way's sum must be lower by this much
  static constexpr size_t kCounted = 3;    // ops in each way's figure
  static constexpr uint32_t kProbeOps = kCounted + 1;

  // Both figures of a decision: the way in use, the way probed (microseconds).
  using Figures = std::array<double, 2>;

  // `ways`: those allowed, the first where each size class starts (one: fixed). Overlapped is
  // the same as split for a buffer of one segment: size classes below `overlap_from` bytes take
  // split for it.
  explicit PathChooser(std::vector<LargeWay> ways = {LargeWay::kSplit, LargeWay::kFlat},
                       size_t overlap_from = 0);

  // The way for the next op of `bytes`.
  LargeWay next(size_t bytes);
  // That op took `us` on this rank. True when a probe just ended: the ranks must now sum
  // figures(bytes) and pass the sums to agree().
  bool record(size_t bytes, LargeWay way, double us);
  Figures figures(size_t bytes) const;
  LargeWay probed(size_t bytes) const;  // the way the last probe of `bytes` took
  // Every rank's figures summed: switches when the probed way's sum is lower by kMargin. The
  // way ops of `bytes` take from now on.
  LargeWay agree(size_t bytes, const Figures& sums);
  LargeWay preferred(size_t bytes) const;

 private:
  static constexpr int kClasses = 40;
  static constexpr size_t kMaxWays = 3;
  struct SizeClass {
    std::array<LargeWay, kMaxWays> ways{};  // those this class may take (set by its first op)
    size_t count = 0;
    LargeWay way = LargeWay::kSplit;
    LargeWay probe_way = LargeWay::kSplit;
    size_t turn = 0;                        // which of the other ways the next probe takes
    std::array<double, kCounted> recent{};  // the way in use: its last ops' times (0: none)
    size_t recent_next = 0;
    double probe = 0;                     // the least of the probe's counted ops (0: none yet)
    bool probe_warm = false;              // the probe's first op was seen (and not counted)
    uint32_t until_probe = kCounted + 1;  // ops before the next probe (the first is cold, not counted)
    uint32_t probing = 0;                 // probe ops left to run
    bool warm = false;                    // the class's first op was seen (and not counted)
    uint32_t interval = kFirstInterval;   // the gap after the next probe
  };
  static double least(double a, double b);
  static size_t class_of(size_t bytes);
  SizeClass ways_of(size_t cls) const;  // a class not yet seen: its ways, and the first in use
  SizeClass& at(size_t bytes);
  LargeWay next_probe(SizeClass& c) const;

  std::vector<LargeWay> ways_;
  size_t overlap_from_;
  std::array<SizeClass, kClasses> classes_{};
};

}  // namespace ddp::comm::tcp
