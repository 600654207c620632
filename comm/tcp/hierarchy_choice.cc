#include "comm/tcp/hierarchy_choice.h"

#include <algorithm>
#include <array>

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

namespace {

// Every way, those `ways` allows first (in its order), so that the chooser knows every name.
std::vector<Chooser::Way> order_of(const std::vector<LargeWay>& ways) {
  if (ways.empty() || ways.size() > 3) DDP_THROW(InvalidArgument, "PathChooser: 1 to 3 ways");
  std::vector<Chooser::Way> order;
  order.reserve(ways.size());
  for (LargeWay w : ways) order.push_back(static_cast<Chooser::Way>(w));
  return order;
}

constexpr std::array<const char*, 3> kWayNames = {"split", "flat", "overlapped"};

}  // namespace

PathChooser::PathChooser(const std::vector<LargeWay>& ways, size_t overlap_from)
    : chooser_(kLargeWayPolicy, order_of(ways), kWayNames) {
  // A class whose smallest buffer has one segment takes split for overlapped (the same steps on
  // one thread).
  chooser_.same_below(index(LargeWay::kOverlapped), overlap_from, index(LargeWay::kSplit));
}

}  // namespace ddp::comm::tcp
