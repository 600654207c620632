#include "comm/tcp/hierarchy_choice.h"

#include <algorithm>
#include <array>

#include "common/error.h"
#include "common/settings.h"

namespace ddp::comm::tcp {

static_assert(settings::choices_are(settings::kTcpHierarchyLarge, "auto|split|flat"));  // LargeSetting

OverlapSetting overlap_setting() {
  const std::optional<bool> on = settings::auto_bool(settings::kTcpHierarchyOverlap);
  if (!on) return OverlapSetting::kAuto;
  return *on ? OverlapSetting::kOn : OverlapSetting::kOff;
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
    : EnumChooser(kLargeWayPolicy, order_of(ways), kWayNames) {
  // A class whose smallest buffer has one segment takes split for overlapped (the same steps on
  // one thread).
  chooser_.same_below(index(LargeWay::kOverlapped), overlap_from, index(LargeWay::kSplit));
}

}  // namespace ddp::comm::tcp
