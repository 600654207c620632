#pragma once
// StoreChooser: how a chunked shared-memory collective (all_reduce, all_gather, reduce_scatter,
// all_to_all: a chooser each) writes what its peers read next: ordinary stores, which leave the
// lines in this core's cache, or streaming stores, which send them to memory; or, offered where
// every rank reaches every peer's memory, cross-memory attach (kCross: shm_cross.h).
// Which is faster depends on whether the peer shares this core's cache, and that can change under
// a running job (a VM's vCPUs moved apart): so it is measured, by a Chooser under kStorePolicy
// (chooser.h): rank 0 times the data movement of its own ops (not the waits), and every rank uses
// its choice (ShmChannel::begin_stores). DDP_TCP_SHM_STORES fixes it. A way that turns out not
// to run in the group is withdrawn. Called by one thread at a time.
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <string>

#include "comm/tcp/chooser.h"

namespace ddp::comm::tcp {

// How a shared-memory collective moves what its peers read: the ways a chooser weighs.
enum class StoreMode : uint8_t { kCached = 0, kStreaming = 1, kCross = 2 };
// DDP_TCP_SHM_STORES's choices, in the table's order (settings::choice_as).
enum class StoreSetting { kAuto, kCached, kStreaming };
const char* to_string(StoreMode mode);

class StoreChooser : public EnumChooser<StoreMode> {
 public:
  static constexpr uint32_t kFirstInterval = kStorePolicy.first_interval;
  static constexpr uint32_t kMaxInterval = kStorePolicy.max_interval;
  static constexpr double kMargin = kStorePolicy.margin;  // a probe must win by this much to switch
  static constexpr int kModes = 3;

  // auto weighs cached and streaming stores, cached first; a fixed setting has one mode.
  explicit StoreChooser(StoreSetting setting = StoreSetting::kAuto);

  // Adds a way to weigh (kCross); alone: the only one, while it may run.
  void offer(StoreMode mode, bool alone = false);
  // A way that cannot run here (after it was offered): never chosen again.
  void withdraw(StoreMode mode) { chooser_.withdraw(index(mode)); }

  // An op of `bytes` in the mode next() gave moved its data in `busy`.
  void record(size_t bytes, StoreMode m, std::chrono::nanoseconds busy);
};

}  // namespace ddp::comm::tcp
