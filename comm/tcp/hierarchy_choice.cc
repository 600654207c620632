#include "comm/tcp/hierarchy_choice.h"

#include <algorithm>
#include <bit>

#include "common/error.h"

namespace ddp::comm::tcp {

LargeSetting parse_large_setting(const std::string& value) {
  if (value == "auto") return LargeSetting::kAuto;
  if (value == "split") return LargeSetting::kSplit;
  if (value == "flat") return LargeSetting::kFlat;
  DDP_THROW(InvalidArgument, "DDP_TCP_HIERARCHY_LARGE='", value, "': choose auto, split or flat");
}

const char* to_string(LargeWay way) { return way == LargeWay::kSplit ? "split" : "flat"; }

const char* to_string(LargeSetting setting) {
  switch (setting) {
    case LargeSetting::kSplit: return "split";
    case LargeSetting::kFlat: return "flat";
    case LargeSetting::kAuto: break;
  }
  return "auto";
}

PathChooser::PathChooser(LargeSetting setting) : setting_(setting) {}

size_t PathChooser::class_of(size_t bytes) {
  const size_t log2 = bytes == 0 ? 0 : static_cast<size_t>(std::bit_width(bytes)) - 1;
  return std::min<size_t>(log2, kClasses - 1);
}

LargeWay PathChooser::next(size_t bytes) {
  if (setting_ != LargeSetting::kAuto) return preferred(bytes);
  SizeClass& c = classes_[class_of(bytes)];
  if (c.probing > 0) return other(c.way);
  if (c.until_probe > 0) {
    --c.until_probe;
    return c.way;
  }
  c.probing = 2;
  return other(c.way);
}

bool PathChooser::record(size_t bytes, LargeWay way, double us) {
  if (setting_ != LargeSetting::kAuto) return false;
  SizeClass& c = classes_[class_of(bytes)];
  if (way == c.way) {
    if (!c.warm) {  // a class's first op touches its buffers first: no figure
      c.warm = true;
      return false;
    }
    c.recent[c.recent_next++ % kRecent] = us;
    return false;
  }
  // A probe: its first op finds the caches as the way in use left them (not counted).
  c.probe = us;
  return --c.probing == 0;
}

PathChooser::Figures PathChooser::figures(size_t bytes) const {
  const SizeClass& c = classes_[class_of(bytes)];
  double least = 0;
  for (double t : c.recent) {
    if (t > 0 && (least == 0 || t < least)) least = t;
  }
  return {least, c.probe};
}

LargeWay PathChooser::agree(size_t bytes, const Figures& sums) {
  SizeClass& c = classes_[class_of(bytes)];
  if (sums[1] * kMargin < sums[0]) {
    c.way = other(c.way);
    c.recent = {c.probe};  // this rank's figure for the way now in use
    c.recent_next = 1;
    c.interval = kFirstInterval;
  }
  c.until_probe = c.interval;  // the next gap doubles while the choice holds
  c.interval = std::min(c.interval * 2, kMaxInterval);
  return c.way;
}

LargeWay PathChooser::preferred(size_t bytes) const {
  if (setting_ == LargeSetting::kSplit) return LargeWay::kSplit;
  if (setting_ == LargeSetting::kFlat) return LargeWay::kFlat;
  return classes_[class_of(bytes)].way;
}

}  // namespace ddp::comm::tcp
