#pragma once
// StoreChooser: how a chunked shared-memory collective (all_reduce, all_gather, reduce_scatter,
// all_to_all: a chooser each) writes what its peers read next: ordinary stores, which leave the
// lines in this core's cache, or streaming stores, which send them to memory; or, offered where
// every rank reaches every peer's memory, cross-memory attach (kCross: shm_cross.h).
// Which is faster depends on whether the peer shares this core's cache, and that can change under
// a running job (a VM's vCPUs moved apart): so it is measured, not assumed. Rank 0 times the data
// movement of its own ops per size class (not the waits), and every rank uses its choice
// (ShmChannel::begin_stores): what streaming saves falls to the readers. It probes the other ways
// (two ops, the second counted: the first finds cold caches) after 8 ops, 16, ... up to 256 while
// the choice holds (a probe costs its ops the slower speed), and at once when the way in use gets
// slower than another's last figure. DDP_TCP_SHM_STORES fixes it. A way that turns out not to
// run in the group is withdrawn. Called by one thread at a time.
#include <array>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <string>

namespace ddp::comm::tcp {

// How a shared-memory collective moves what its peers read: the ways a chooser weighs.
enum class StoreMode : uint8_t { kCached = 0, kStreaming = 1, kCross = 2 };
enum class StoreSetting { kAuto, kCached, kStreaming };

// DDP_TCP_SHM_STORES's value: auto, cached or streaming; InvalidArgument naming it otherwise.
StoreSetting parse_store_setting(const std::string& value);
const char* to_string(StoreMode mode);

class StoreChooser {
 public:
  static constexpr uint32_t kFirstInterval = 8;
  static constexpr uint32_t kMaxInterval = 256;
  static constexpr double kMargin = 1.15;  // a probe must win by this much to switch
  static constexpr int kModes = 3;

  // auto weighs cached and streaming stores, cached first; a fixed setting has one mode.
  explicit StoreChooser(StoreSetting setting = StoreSetting::kAuto);

  // Adds a way to weigh (kCross); alone: the only one, while it may run.
  void offer(StoreMode mode, bool alone = false);
  // A way that cannot run here (after it was offered): never chosen again.
  void withdraw(StoreMode mode);

  // The mode for the next op of `bytes` (a probe of another mode now and then).
  StoreMode next(size_t bytes);
  // That op's data movement took `busy`.
  void record(size_t bytes, StoreMode mode, std::chrono::nanoseconds busy);
  // The mode ops of `bytes` use between probes.
  StoreMode preferred(size_t bytes) const;

 private:
  static constexpr int kClasses = 20;
  struct SizeClass {
    std::array<double, kModes> cost{};  // ns per byte, recent (0: not measured yet)
    StoreMode mode = StoreMode::kCached;
    StoreMode probed = StoreMode::kCached;  // the last mode probed (the next probe takes the one after)
    uint32_t until_probe = 2;               // ops before the next probe
    bool again = false;                     // the next op repeats the last probe
    bool again_done = false;                // the probe's first op was run (and not counted)
    bool warm = false;                      // the class's first op was seen (and not counted)
    uint32_t interval = kFirstInterval;     // the gap after the next probe
  };
  static size_t class_of(size_t bytes);
  int count() const;
  StoreMode first() const;  // the first mode still allowed
  StoreMode probe_after(const SizeClass& c) const;

  std::array<bool, kModes> allowed_{};
  StoreMode start_ = StoreMode::kCached;  // where every class starts, while allowed
  std::array<SizeClass, kClasses> classes_{};
};

}  // namespace ddp::comm::tcp
