#include "comm/tcp/shm_store_choice.h"

#include <array>

#include "common/error.h"
#include "common/settings.h"

namespace ddp::comm::tcp {

static_assert(settings::choices_are(settings::kTcpShmStores, "auto|cached|streaming"));  // StoreSetting

const char* to_string(StoreMode mode) {
  switch (mode) {
    case StoreMode::kCached: return "cached";
    case StoreMode::kStreaming: return "streaming";
    case StoreMode::kCross: return "cross-memory";
  }
  return "?";
}

namespace {

constexpr std::array<Chooser::Way, 2> kOrder = {0, 1};  // cached, streaming (cross-memory: offered)
constexpr std::array<const char*, 3> kModeNames = {"cached", "streaming", "cross-memory"};

}  // namespace

StoreChooser::StoreChooser(StoreSetting setting) : EnumChooser(kStorePolicy, kOrder, kModeNames) {
  if (setting == StoreSetting::kCached) chooser_.force(index(StoreMode::kCached));
  if (setting == StoreSetting::kStreaming) chooser_.force(index(StoreMode::kStreaming));
}

void StoreChooser::offer(StoreMode m, bool alone) {
  if (alone) {
    chooser_.force(index(m));
  } else {
    chooser_.allow(index(m));
  }
}

void StoreChooser::record(size_t bytes, StoreMode m, std::chrono::nanoseconds busy) {
  if (bytes == 0) return;
  chooser_.record(bytes, index(m), static_cast<double>(busy.count()) / static_cast<double>(bytes));
}

}  // namespace ddp::comm::tcp
