#pragma once
// ShmSegment: the shared-memory area of one group on one host, and the flag protocol on it.
//
// Layout: a header (geometry, a futex word, a waiter count), one control block per rank
// (monotonic counters on their own cache lines, the last fingerprints) and, per rank, `depth`
// staging slots of `slot_bytes`. Rank 0 creates the POSIX shm object, the others open it by
// the name published in the store, and it is unlinked once every rank has mapped it (the
// group's setup barrier), so nothing is left behind even if a process is SIGKILLed later.
//
// Counters only grow (tickets: one per pipelined chunk, the same on every rank because every
// rank runs the same collectives). A writer stores a counter (seq_cst) and, when someone sleeps,
// bumps the futex word and wakes all; a waiter spins briefly, then registers and futex-waits
// (bounded, so a lost peer or a deadline is noticed).
#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <string>

#include "comm/tcp/cross_memory.h"
#include "comm/tcp/op.h"
#include "comm/tcp/shm_file.h"

namespace ddp::comm::tcp {

inline constexpr int kFingerprintRing = 4;

enum class Counter : int { kStaged = 0, kReduced = 1, kDone = 2, kEntered = 3 };

// One rank's counters share a cache line: only that rank writes them, and a peer that polls
// one usually needs the others next.
struct alignas(64) RankControl {
  std::atomic<uint64_t> counters[4] = {};
  // A hash of the fingerprint of op seq at [seq % 2], on the counters' line: the common check
  // costs no extra cache miss. The full fingerprints (for the error message) follow.
  std::atomic<uint64_t> hashes[2] = {};
  // An all_reduce or broadcast of at most 8 bytes: this rank's value, in the two halves in turn (written
  // before kEntered), so a peer takes it with the counter, one cache line (shm_oneshot.h).
  std::atomic<uint64_t> small[2] = {};
  // An all_reduce or broadcast of 9 to kWideBytes: this rank's buffer, in two lines used in turn like the
  // halves of `small` (written before kEntered): one more line for a peer to read, but no slot,
  // no ticket and no further counter (shm_oneshot.h).
  alignas(64) std::atomic<uint64_t> wide[2][32] = {};
  // For op seq at [seq % 2], written before kEntered: where its buffer lies in the group's
  // memory (shm_region.h: a tag of region, offset, length and seq), or 0 when it does not.
  // Every rank's the same: the all_reduce reads and writes the peers' buffers directly.
  alignas(64) std::atomic<uint64_t> direct[2] = {};
  // Rank 0's only: the StoreMode (shm_store_choice.h) every rank's chunked all_reduce of op seq
  // uses, at [seq % 2], written before kEntered.
  std::atomic<uint32_t> stores[2] = {};
  // The CPU this rank last waited on (-1: not yet): a waiter whose peer shares its CPU yields
  // at once instead of spinning on the core the peer needs.
  std::atomic<int32_t> cpu{-1};
  // For op seq at [seq % 2], written before kEntered: this rank's input buffer (address, bytes)
  // when it offers the op to cross-memory attach (shm_cross.h), else 0.
  std::atomic<uint64_t> cross[2][2] = {};
  // Written before the group's set-up barrier: where peers find this rank's probe word
  // (cross_memory.h; pid 0: it offers none).
  alignas(64) std::atomic<int32_t> pid{0};
  std::atomic<uint64_t> probe_addr{0};
  std::atomic<uint64_t> probe_value{0};
  alignas(64) Fingerprint fingerprints[kFingerprintRing];  // by seq % ring, written before kEntered
  // By seq % ring, written before kEntered: the tickets this rank had taken when it entered op
  // seq (shm_fingerprint.h; read only when a hash differs).
  uint64_t entry_tickets[kFingerprintRing] = {};
};

static_assert(offsetof(RankControl, wide) == 64, "a rank's counters, hashes and small values fill one line");
static_assert(offsetof(RankControl, pid) - offsetof(RankControl, direct) == 64,
              "an op's direct and cross tags, the store mode and the CPU fill one line");
inline constexpr size_t kWideBytes = sizeof(RankControl::wide[0]);

struct alignas(64) SegmentHeader {
  // Stored last by the creator (release), loaded first by the others (acquire): a rank that sees
  // it sees the geometry and every RankControl initialised.
  std::atomic<uint64_t> magic;
  uint32_t world;
  uint32_t depth;
  uint64_t slot_bytes;
  uint64_t oneshot_bytes;
  alignas(64) std::atomic<uint32_t> futex;
  alignas(64) std::atomic<uint32_t> waiters;
};

// A futex word in shared memory, across processes: moves the word and wakes every sleeper on
// it; or sleeps while it still holds `seen`, for `timeout` at most.
void futex_wake_all(std::atomic<uint32_t>& word);
void futex_sleep(std::atomic<uint32_t>& word, uint32_t seen, std::chrono::microseconds timeout);

struct ShmGeometry {
  int world = 1;
  int depth = 4;
  size_t slot_bytes = 256 << 10;
  size_t oneshot_bytes = 32 << 10;
  size_t total_bytes() const;
};

// The slot (chunk) size for a machine whose L2 holds l2_bytes (0: unknown). A chunked
// all_reduce keeps about four chunks' worth of lines hot per rank (its buffer's chunk, its own
// slot, the peer slots it reads, the previous chunk being copied out), so a chunk of L2 / 4
// stays in the L2 while it is reduced and copied: memory then sees one read and one write per
// byte. A power of two in [64 KiB, 256 KiB]; 256 KiB when unknown (larger chunks spill to L3).
size_t slot_bytes_for_l2(size_t l2_bytes);

class ShmSegment {
 public:
  ShmSegment() = default;
  // Rank 0: a fresh object under a unique name. Others: open and check the header.
  static ShmSegment create(const ShmGeometry& geometry);
  static ShmSegment open(const std::string& name, int world);

  const std::string& name() const { return file_.name(); }
  void unlink() noexcept { file_.unlink(); }  // idempotent; after every rank mapped it
  bool valid() const { return file_.valid(); }

  SegmentHeader& header() const { return *reinterpret_cast<SegmentHeader*>(file_.base()); }
  RankControl& control(int rank) const;
  char* slot(int rank, uint64_t ticket) const;
  const ShmGeometry& geometry() const { return geometry_; }

  std::atomic<uint64_t>& counter(int rank, Counter c) const {
    return control(rank).counters[static_cast<int>(c)];
  }
  // Cross-memory attach (cross_memory.h): what `rank` shows its peers, before the set-up
  // barrier (a default probe: it offers none); and what a peer showed.
  void announce(int rank, const CrossProbe& probe) const;
  CrossProbe probe_of(int rank) const;
  // Store a counter and wake sleepers.
  void publish(int rank, Counter c, uint64_t value) const;
  // Sleep until the futex word moves past `seen` or `timeout` passes (at most).
  void sleep(uint32_t seen, Millis timeout) const;
  // Moves the futex word and wakes every sleeper (of every rank: they look again and sleep on),
  // so that one of ours sees a failure recorded before (an abort) at once.
  void wake() const;

 private:
  ShmFile file_;
  ShmGeometry geometry_;
};

}  // namespace ddp::comm::tcp
