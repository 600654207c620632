#pragma once
// StoreChooser: how a chunked shared-memory collective (all_reduce; all_gather, reduce_scatter
// and all_to_all, a chooser each) writes what its peers read next (the slices it stages, the
// slice it reduced): with ordinary stores, which leave the lines in this core's cache for the
// peer to take from there, or with streaming (non-temporal) stores, which send them to memory
// (copy_bytes_streaming).
//
// Which is faster depends on where the peer runs, and that can change under a running job.
// Measured on a 2-vCPU EPYC VM, one core writing 256 KiB chunks that the other reads:
// - peer on a near core (sharing an L3; a line's round trip 120 ns): cached 12 GB/s, streamed
//   6.5;
// - peer on a far core (the host put the two vCPUs apart for 10-60 s at a time; round trip
//   460 ns, as between sockets): cached 2.2 GB/s, every line snooped out of the writer's
//   cache; streamed 6.5-10, from memory. The tcp all_reduce of 64 MiB took 52 ms there
//   against 7 ms on near cores.
// So it is measured, not assumed. Rank 0 times the data movement of its own ops (copies and
// reductions; not the waits, so a late peer does not count), per size class (powers of two),
// and every rank uses the mode it chose (ShmChannel::begin_stores): what streaming saves falls
// to the readers, so ranks choosing alone could each see only its cost and settle on cached
// stores where streaming would serve all. Now and then it runs one op the other way to see
// whether the machine changed: the third op of a class (the first is cold and not counted: an
// all_gather's first touch of its output took 245 us, 6x a warm op), then after 8 ops, 16,
// ... up to 256 while the choice holds, and at once when the mode in use gets slower than the
// other's last figure.
// A probe of the losing mode costs its ops at that mode's speed (up to 6x, far cores with cached
// stores), and the ops after it find the caches disturbed: with probes every 64 ops, 2 ranks'
// all_gather of 1 MiB by cross-memory took 58 us a op in 100-op loops against 47 with no probes
// (2-vCPU VM). So at most every 256 ops: a host that moves the vCPUs apart (that VM did every
// 10-60 s) makes the mode in use slower, which is probed at once; one that moves them back is
// followed within 256 ops.
// DDP_TCP_SHM_STORES=cached|streaming fixes it (rank 0's value counts).
//
// The choosers of all_reduce, all_gather and reduce_scatter may also be offered a third way,
// cross-memory attach (kCross: shm_cross.h, no slots at all), where every rank can reach every
// peer's memory. It is weighed the same way, by rank 0's own busy time per byte; with three
// ways, the probes take the other two in turn. A probe is two ops of the other mode, and only
// the second counts: the first finds the caches as the mode in use left them (a cross-memory
// op right after chunked ones took 0.11-0.19 ns a byte at 1 MiB, 2.3-4x its steady 0.047), and
// so does a mode's very first op. A way that turns out not to run in the group (a peer could
// not offer it) is withdrawn. Called by one thread at a time.
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
