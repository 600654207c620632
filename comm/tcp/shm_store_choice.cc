#include "comm/tcp/shm_store_choice.h"

#include <algorithm>
#include <bit>

#include "common/error.h"

namespace ddp::comm::tcp {
namespace {

StoreMode other(StoreMode m) { return m == StoreMode::kCached ? StoreMode::kStreaming : StoreMode::kCached; }
int index(StoreMode m) { return static_cast<int>(m); }

}  // namespace

StoreSetting parse_store_setting(const std::string& value) {
  if (value == "auto") return StoreSetting::kAuto;
  if (value == "cached") return StoreSetting::kCached;
  if (value == "streaming") return StoreSetting::kStreaming;
  DDP_THROW(InvalidArgument, "DDP_TCP_SHM_STORES='", value, "': choose auto, cached or streaming");
}

const char* to_string(StoreMode mode) { return mode == StoreMode::kCached ? "cached" : "streaming"; }

size_t StoreChooser::class_of(size_t bytes) {
  const size_t log2 = bytes == 0 ? 0 : static_cast<size_t>(std::bit_width(bytes)) - 1;
  return log2 < 10 ? 0 : std::min<size_t>(log2 - 10, kClasses - 1);  // [1 KiB, 2 KiB) is class 0
}

StoreMode StoreChooser::next(size_t bytes) {
  if (setting_ == StoreSetting::kCached) return StoreMode::kCached;
  if (setting_ == StoreSetting::kStreaming) return StoreMode::kStreaming;
  SizeClass& c = classes_[class_of(bytes)];
  if (c.until_probe > 0) {
    --c.until_probe;
    return c.mode;
  }
  return other(c.mode);
}

void StoreChooser::record(size_t bytes, StoreMode mode, std::chrono::nanoseconds busy) {
  if (setting_ != StoreSetting::kAuto || bytes == 0) return;
  SizeClass& c = classes_[class_of(bytes)];
  if (!c.warm) {  // a class's first op is cold (its buffers' first touch: page faults): no figure
    c.warm = true;
    return;
  }
  const double sample = static_cast<double>(busy.count()) / static_cast<double>(bytes);
  double& mine = c.cost[index(mode)];
  if (mode == c.mode) {
    mine = mine == 0 ? sample : (mine + sample) / 2;
    // Slower now than the other mode's last figure: the machine may have changed; look again.
    const double theirs = c.cost[index(other(mode))];
    if (theirs > 0 && theirs * kMargin < mine) c.until_probe = 0;
    return;
  }
  // A probe.
  mine = sample;
  const double current = c.cost[index(c.mode)];
  if (current == 0 || sample * kMargin < current) {
    c.mode = mode;
    c.interval = kFirstInterval;
  }
  c.until_probe = c.interval;  // the next gap doubles while the choice holds
  c.interval = std::min(c.interval * 2, kMaxInterval);
}

StoreMode StoreChooser::preferred(size_t bytes) const {
  if (setting_ == StoreSetting::kCached) return StoreMode::kCached;
  if (setting_ == StoreSetting::kStreaming) return StoreMode::kStreaming;
  return classes_[class_of(bytes)].mode;
}

}  // namespace ddp::comm::tcp
