#include "comm/tcp/shm_store_choice.h"

#include <algorithm>
#include <bit>

#include "common/error.h"
#include "common/settings.h"

namespace ddp::comm::tcp {
namespace {

int index(StoreMode m) { return static_cast<int>(m); }
StoreMode mode_at(int i) { return static_cast<StoreMode>(i); }

}  // namespace

StoreSetting parse_store_setting(const std::string& value) {
  if (value == "auto") return StoreSetting::kAuto;
  if (value == "cached") return StoreSetting::kCached;
  if (value == "streaming") return StoreSetting::kStreaming;
  DDP_THROW(InvalidArgument, settings::kTcpShmStores.name, "='", value,
            "': choose auto, cached or streaming");
}

const char* to_string(StoreMode mode) {
  switch (mode) {
    case StoreMode::kCached: return "cached";
    case StoreMode::kStreaming: return "streaming";
    case StoreMode::kCross: return "cross-memory";
  }
  return "?";
}

StoreChooser::StoreChooser(StoreSetting setting) {
  allowed_[index(StoreMode::kCached)] = setting != StoreSetting::kStreaming;
  allowed_[index(StoreMode::kStreaming)] = setting != StoreSetting::kCached;
  start_ = setting == StoreSetting::kStreaming ? StoreMode::kStreaming : StoreMode::kCached;
  for (SizeClass& c : classes_) c.mode = c.probed = start_;
}

void StoreChooser::offer(StoreMode mode, bool alone) {
  if (alone) {
    allowed_.fill(false);
    start_ = mode;
    for (SizeClass& c : classes_) c.mode = mode;
  }
  allowed_[index(mode)] = true;
}

void StoreChooser::withdraw(StoreMode mode) {
  allowed_[index(mode)] = false;
  if (count() == 0) allowed_[index(StoreMode::kCached)] = true;
  for (SizeClass& c : classes_) {
    if (c.mode == mode) c.mode = first();
    if (c.probed == mode) c.again = c.again_done = false;  // its probe's second op: not run
  }
}

int StoreChooser::count() const {
  return static_cast<int>(std::count(allowed_.begin(), allowed_.end(), true));
}

StoreMode StoreChooser::first() const {
  if (allowed_[index(start_)]) return start_;
  for (int i = 0; i < kModes; ++i) {
    if (allowed_[i]) return mode_at(i);
  }
  return StoreMode::kCached;
}

// The allowed mode after the last one probed, in turn, never the one in use.
StoreMode StoreChooser::probe_after(const SizeClass& c) const {
  for (int k = 1; k <= kModes; ++k) {
    const int i = (index(c.probed) + k) % kModes;
    if (allowed_[i] && mode_at(i) != c.mode) return mode_at(i);
  }
  return c.mode;
}

size_t StoreChooser::class_of(size_t bytes) {
  const size_t log2 = bytes == 0 ? 0 : static_cast<size_t>(std::bit_width(bytes)) - 1;
  return log2 < 10 ? 0 : std::min<size_t>(log2 - 10, kClasses - 1);  // [1 KiB, 2 KiB) is class 0
}

StoreMode StoreChooser::next(size_t bytes) {
  if (count() == 1) return first();
  SizeClass& c = classes_[class_of(bytes)];
  if (c.until_probe > 0) {
    --c.until_probe;
    return c.mode;
  }
  if (!c.again) c.probed = probe_after(c);
  c.again = false;
  return c.probed;
}

void StoreChooser::record(size_t bytes, StoreMode mode, std::chrono::nanoseconds busy) {
  if (count() == 1 || bytes == 0 || !allowed_[index(mode)]) return;
  SizeClass& c = classes_[class_of(bytes)];
  if (!c.warm) {  // a class's first op is cold (its buffers' first touch: page faults): no figure
    c.warm = true;
    return;
  }
  if (mode != c.mode && !c.again_done) {  // a probe's first op finds the caches as the other
    c.again = c.again_done = true;        // mode left them: no figure; it runs again
    return;
  }
  c.again_done = false;
  const double sample = static_cast<double>(busy.count()) / static_cast<double>(bytes);
  double& mine = c.cost[index(mode)];
  if (mode == c.mode) {
    mine = mine == 0 ? sample : (mine + sample) / 2;
    // Slower now than another mode's last figure: the machine may have changed; look again,
    // at that mode.
    for (int i = 0; i < kModes; ++i) {
      const double theirs = c.cost[i];
      if (allowed_[i] && i != index(mode) && theirs > 0 && theirs * kMargin < mine) {
        c.until_probe = 0;
        c.probed = mode_at(i);
        c.again = true;
      }
    }
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
  if (count() == 1) return first();
  return classes_[class_of(bytes)].mode;
}

}  // namespace ddp::comm::tcp
