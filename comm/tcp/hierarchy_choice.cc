#include "comm/tcp/hierarchy_choice.h"

#include <algorithm>
#include <bit>

#include "common/error.h"
#include "common/settings.h"

namespace ddp::comm::tcp {

LargeSetting parse_large_setting(const std::string& value) {
  if (value == "auto") return LargeSetting::kAuto;
  if (value == "split") return LargeSetting::kSplit;
  if (value == "flat") return LargeSetting::kFlat;
  DDP_THROW(InvalidArgument, settings::kTcpHierarchyLarge.name, "='", value, "': choose auto, split or flat");
}

OverlapSetting parse_overlap_setting(const std::string& value) {
  if (value == "auto") return OverlapSetting::kAuto;
  if (auto b = settings::parse_bool(value)) return *b ? OverlapSetting::kOn : OverlapSetting::kOff;
  DDP_THROW(InvalidArgument, settings::kTcpHierarchyOverlap.name, "='", value, "': choose auto, 1 or 0");
}

const char* to_string(LargeWay way) {
  switch (way) {
    case LargeWay::kFlat: return "flat";
    case LargeWay::kOverlapped: return "overlapped";
    case LargeWay::kSplit: break;
  }
  return "split";
}

bool overlap_first(int cpus, int ranks_here) { return cpus >= std::max(1, ranks_here); }

std::vector<LargeWay> WayPolicy::ways(bool flat) const {
  std::vector<LargeWay> w;
  if (!flat || large != LargeSetting::kFlat) {
    if (overlap == OverlapSetting::kAuto) {
      w = overlap_first ? std::vector{LargeWay::kOverlapped, LargeWay::kSplit}
                        : std::vector{LargeWay::kSplit, LargeWay::kOverlapped};
    } else {
      w = {overlap == OverlapSetting::kOn ? LargeWay::kOverlapped : LargeWay::kSplit};
    }
  }
  if (flat && large != LargeSetting::kSplit) w.push_back(LargeWay::kFlat);
  return w;
}

PathChooser::PathChooser(std::vector<LargeWay> ways, size_t overlap_from)
    : ways_(std::move(ways)), overlap_from_(overlap_from) {
  if (ways_.empty() || ways_.size() > kMaxWays) DDP_THROW(InvalidArgument, "PathChooser: 1 to 3 ways");
}

// The lesser of two times, 0 standing for none.
double PathChooser::least(double a, double b) {
  if (a <= 0) return b;
  return b > 0 ? std::min(a, b) : a;
}

size_t PathChooser::class_of(size_t bytes) {
  const size_t log2 = bytes == 0 ? 0 : static_cast<size_t>(std::bit_width(bytes)) - 1;
  return std::min<size_t>(log2, kClasses - 1);
}

// A class whose smallest buffer has one segment takes split for overlapped (the same steps on
// one thread), each way once.
PathChooser::SizeClass PathChooser::ways_of(size_t cls) const {
  SizeClass c;
  const bool segments = (size_t{1} << cls) >= overlap_from_;
  for (LargeWay w : ways_) {
    if (w == LargeWay::kOverlapped && !segments) w = LargeWay::kSplit;
    if (std::find(c.ways.begin(), c.ways.begin() + static_cast<std::ptrdiff_t>(c.count), w) ==
        c.ways.begin() + static_cast<std::ptrdiff_t>(c.count))
      c.ways[c.count++] = w;
  }
  c.way = c.ways[0];
  return c;
}

PathChooser::SizeClass& PathChooser::at(size_t bytes) {
  const size_t cls = class_of(bytes);
  SizeClass& c = classes_[cls];
  if (c.count == 0) c = ways_of(cls);
  return c;
}

// The other ways in turn.
LargeWay PathChooser::next_probe(SizeClass& c) const {
  for (size_t i = 0; i < c.count; ++i) {
    const LargeWay w = c.ways[c.turn++ % c.count];
    if (w != c.way) return w;
  }
  return c.way;
}

LargeWay PathChooser::next(size_t bytes) {
  SizeClass& c = at(bytes);
  if (c.count == 1) return c.way;
  if (c.probing > 0) return c.probe_way;
  if (c.until_probe > 0) {
    --c.until_probe;
    return c.way;
  }
  c.probing = kProbeOps;
  c.probe_way = next_probe(c);
  c.probe = 0;
  c.probe_warm = false;
  return c.probe_way;
}

bool PathChooser::record(size_t bytes, LargeWay way, double us) {
  SizeClass& c = at(bytes);
  if (c.count == 1) return false;
  if (way == c.way) {
    if (!c.warm) {  // a class's first op touches its buffers first: no figure
      c.warm = true;
      return false;
    }
    c.recent[c.recent_next++ % kCounted] = us;
    return false;
  }
  // A probe: its first op finds the caches as the way in use left them (not counted).
  if (c.probe_warm) c.probe = least(c.probe, us);
  c.probe_warm = true;
  return --c.probing == 0;
}

PathChooser::Figures PathChooser::figures(size_t bytes) const {
  const SizeClass& c = classes_[class_of(bytes)];
  double in_use = 0;
  for (double t : c.recent) in_use = least(in_use, t);
  return {in_use, c.probe};
}

LargeWay PathChooser::probed(size_t bytes) const { return classes_[class_of(bytes)].probe_way; }

LargeWay PathChooser::agree(size_t bytes, const Figures& sums) {
  SizeClass& c = at(bytes);
  if (sums[1] * kMargin < sums[0]) {
    c.way = c.probe_way;
    c.recent = {c.probe};  // this rank's figure for the way now in use
    c.recent_next = 1;
    c.interval = kFirstInterval;
  }
  c.until_probe = c.interval;  // the next gap doubles while the choice holds
  c.interval = std::min(c.interval * 2, kMaxInterval);
  return c.way;
}

LargeWay PathChooser::preferred(size_t bytes) const {
  const size_t cls = class_of(bytes);
  return classes_[cls].count > 0 ? classes_[cls].way : ways_of(cls).way;
}

}  // namespace ddp::comm::tcp
