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
// ... up to 64 while the choice holds, and at once when the mode in use gets slower than the
// other's last figure.
// A probe of the losing mode costs one op at that mode's speed (up to 6x, far cores with cached
// stores), so at most every 64 ops: a few percent at worst, and a host that moves the vCPUs
// (that VM did every 10-60 s) is followed within 64 ops.
// DDP_TCP_SHM_STORES=cached|streaming fixes it (rank 0's value counts). Called by one thread at
// a time.
#include <array>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <string>

namespace ddp::comm::tcp {

enum class StoreMode : uint8_t { kCached = 0, kStreaming = 1 };
enum class StoreSetting { kAuto, kCached, kStreaming };

// DDP_TCP_SHM_STORES's value: auto, cached or streaming; InvalidArgument naming it otherwise.
StoreSetting parse_store_setting(const std::string& value);
const char* to_string(StoreMode mode);

class StoreChooser {
 public:
  static constexpr uint32_t kFirstInterval = 8;
  static constexpr uint32_t kMaxInterval = 64;
  static constexpr double kMargin = 1.15;  // a probe must win by this much to switch

  explicit StoreChooser(StoreSetting setting = StoreSetting::kAuto) : setting_(setting) {}

  // The mode for the next op of `bytes` (a probe of the other mode now and then).
  StoreMode next(size_t bytes);
  // That op's data movement took `busy`.
  void record(size_t bytes, StoreMode mode, std::chrono::nanoseconds busy);
  // The mode ops of `bytes` use between probes.
  StoreMode preferred(size_t bytes) const;

 private:
  static constexpr int kClasses = 20;
  struct SizeClass {
    double cost[2] = {0, 0};  // ns per byte, recent (0: not measured yet)
    StoreMode mode = StoreMode::kCached;
    uint32_t until_probe = 2;            // ops before the next probe
    bool warm = false;                   // the first op was seen (and not counted)
    uint32_t interval = kFirstInterval;  // the gap after the next probe
  };
  static size_t class_of(size_t bytes);

  StoreSetting setting_;
  std::array<SizeClass, kClasses> classes_{};
};

}  // namespace ddp::comm::tcp
