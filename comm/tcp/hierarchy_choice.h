#pragma once
// PathChooser: which way a hierarchical group's all_reduce goes above the small path's limit:
// split (reduce_scatter within the host, 1/L of the buffer across per rank, all_gather within),
// overlapped (the same steps, those within the host on a second thread, segment by segment), or
// flat (the group's own sockets between every rank). Split sends less between hosts but adds
// steps within; overlapping pays where the link binds and costs where the CPUs do: so the way is
// measured while the job runs, by a Chooser under kLargeWayPolicy (chooser.h): the ranks sum
// their figures and switch together. DDP_TCP_HIERARCHY_LARGE and DDP_TCP_HIERARCHY_OVERLAP fix
// ways. Called by one thread at a time.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "comm/tcp/chooser.h"

namespace ddp::comm::tcp {

enum class LargeWay : uint8_t { kSplit = 0, kFlat = 1, kOverlapped = 2 };
// DDP_TCP_HIERARCHY_LARGE's choices, in the table's order (settings::choice_as).
enum class LargeSetting : uint8_t { kAuto, kSplit, kFlat };
enum class OverlapSetting : uint8_t { kAuto, kOn, kOff };

// DDP_TCP_HIERARCHY_OVERLAP as read (settings::auto_bool: auto, on or off).
OverlapSetting overlap_setting();
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

class PathChooser : public EnumChooser<LargeWay> {
 public:
  static constexpr uint32_t kFirstInterval = kLargeWayPolicy.first_interval;
  static constexpr uint32_t kMaxInterval = kLargeWayPolicy.max_interval;
  static constexpr double kMargin =
      kLargeWayPolicy.margin;  // the probed way's sum must be lower by this much
  static constexpr size_t kCounted = kLargeWayPolicy.counted;  // ops in each way's figure
  static constexpr uint32_t kProbeOps = kCounted + 1;

  // Both figures of a decision: the way in use, the way probed (microseconds).
  using Figures = Chooser::Figures;

  // `ways`: those allowed, the first where each size class starts (one: fixed). Overlapped is
  // the same as split for a buffer of one segment: size classes below `overlap_from` bytes take
  // split for it.
  explicit PathChooser(const std::vector<LargeWay>& ways = {LargeWay::kSplit, LargeWay::kFlat},
                       size_t overlap_from = 0);

  // An op of `bytes` the way next() gave took `us` on this rank. True when a probe just ended:
  // the ranks must now sum figures(bytes) and pass the sums to agree().
  bool record(size_t bytes, LargeWay w, double us) { return chooser_.record(bytes, index(w), us); }
  Figures figures(size_t bytes) const { return chooser_.figures(bytes); }
  LargeWay probed(size_t bytes) const { return way(chooser_.probed(bytes)); }  // the last probe's way
  // Every rank's figures summed: switches when the probed way's sum is lower by kMargin. The
  // way ops of `bytes` take from now on.
  // `group` names it in the decision's log line.
  LargeWay agree(size_t bytes, const Figures& sums, std::string_view group = {}) {
    return way(chooser_.decide(bytes, sums, group));
  }
};

}  // namespace ddp::comm::tcp
