#pragma once
// ShmChannel: the small stage / publish / wait vocabulary every shared-memory algorithm is
// written in, over one group's ShmSegment.
// - Tickets: each chunk an algorithm moves takes the next ticket (the same sequence on every
//   rank, since every rank runs the same ops). Ticket t uses slot t % depth of each rank; a
//   rank may write its slot for t once every peer published kDone for t - depth (acquire).
// - publish(c, t + 1) says "my counter c reached ticket t"; wait_for / wait_all wait for
//   peers' counters (ShmWait's policy), and verify each peer's fingerprint the first time the
//   op depends on it (ShmFingerprints).
// - ShmStep is one op in progress: its buffers, how far it got (ShmProgress, kept between steps
//   of a resumable algorithm) and how it may wait (ShmPoll: block, or spin at most budget_us
//   and return false with its place kept).
// Called by one thread at a time (the one running the group's op).
#include <cstdint>
#include <functional>
#include <span>
#include <utility>
#include <vector>

#include "comm/tcp/op.h"
#include "comm/tcp/share.h"
#include "comm/tcp/shm_fingerprint.h"
#include "comm/tcp/shm_segment.h"
#include "comm/tcp/shm_store_choice.h"
#include "comm/tcp/shm_wait.h"
#include "comm/types.h"

namespace ddp::comm::tcp {

struct ShmPoll {
  bool block = true;  // false: spin at most budget_us per wait, then give up (place kept)
  int budget_us = 0;
};

// Where a resumable algorithm stands (zero: not started).
// Whether an op takes a way that every rank must agree on: not yet known, taken, or not (the
// op runs another way, as every rank does).
enum class Decided : uint8_t { kNotYet, kTaken, kDeclined };

struct ShmProgress {
  int phase = 0;  // within the current ticket
  int peer = 0;   // copy-out progress
  uint64_t ticket = 0;
  size_t off = 0;  // elements done
  size_t last_off = 0;
  uint64_t last_ticket = 0;
  Decided direct = Decided::kNotYet;  // allreduce_direct_step: in place in group memory
  Decided cross = Decided::kNotYet;   // decide_cross (shm_cross.h): by cross-memory attach, else staged
  int64_t busy_ns = 0;                // allreduce_chunked_step: time in copies and reductions (not waits)
  bool stores_known = false;          // allreduce_chunked_step: rank 0's choice read (begin_stores)
  StoreMode stores = StoreMode::kCached;
};

struct DirectView;  // shm_region.h

struct ShmStep {
  const OpContext& ctx;
  const Buffer& in;
  const Buffer& out;
  ShmProgress& at;
  ShmPoll poll;
  const DirectView* direct = nullptr;     // the buffer in group memory (allreduce_direct_step)
  StoreMode stores = StoreMode::kCached;  // rank 0: how this op writes what peers read
  std::span<char> scratch = {};           // a slot's bytes at least (the cross-memory steps)
  bool timed = false;                     // rank 0's chooser weighs this op (its busy time counts)
};

// What a rank publishes as it enters an op (ShmChannel::begin).
struct ShmEntry {
  uint64_t direct_tag = 0;                // its buffer in group memory (shm_region.h), or 0
  const Buffer* cross = nullptr;          // its buffer, offered to cross-memory attach
  StoreMode stores = StoreMode::kCached;  // rank 0: the mode every rank uses (shm_store_choice.h)
  const Buffer* small = nullptr;          // a small op (oneshot_small): its value (a broadcast's root's)
};

// A copy into this rank's slot, which peers read next: cached or streamed (shm_store_choice.h).
void publish_copy(StoreMode mode, char* slot, const void* from, size_t bytes);

// Adds the time `f` takes to the op's busy time (ShmProgress::busy_ns).
template <typename F>
void timed(ShmProgress& st, F&& f) {
  const auto t0 = Clock::now();
  f();
  st.busy_ns += std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now() - t0).count();
}

// timed() where the op's busy time counts (ShmStep::timed); otherwise f() alone (no clock read
// on a small op's path).
template <typename F>
void timed_if(const ShmStep& s, F&& f) {
  if (s.timed) {
    timed(s.at, std::forward<F>(f));
  } else {
    f();
  }
}

class ShmChannel {
 public:
  struct Options {
    int rank = 0;
    int world = 1;
    bool fingerprints = true;
    int spin_us = 200;
    int yield_us = 20000;
    const std::atomic<int>* blocked = nullptr;  // see ShmWait::Options
  };
  ShmChannel(ShmSegment segment, Options options, GroupHealth* health);
  ShmChannel(const ShmChannel&) = delete;
  ShmChannel& operator=(const ShmChannel&) = delete;

  int rank() const { return opt_.rank; }
  int world() const { return opt_.world; }
  const ShmGeometry& geometry() const { return segment_.geometry(); }
  const ShmSegment& segment() const { return segment_; }
  uint64_t next_ticket() { return ticket_++; }
  char* slot(int rank, uint64_t ticket) const { return segment_.slot(rank, ticket); }

  // A new op: its fingerprint, its entry (direct tag, cross-memory offer, rank 0's store mode,
  // and `small`'s value in RankControl::small up to 8 bytes, else RankControl::wide, the next
  // half in turn), then kEntered. A tagged, offered or small op's peers wait for that, so it
  // wakes them.
  void begin(const OpContext& ctx, const ShmEntry& entry = {});
  int small_half() const { return small_half_; }  // the half the last small op used
  // The store mode rank 0 chose for the op `ctx` (rank 0: `mine`), once it entered the op:
  // false while it has not (with a non-blocking poll). One choice for all: the benefit of
  // streaming stores falls to the readers, so a rank alone could never see it.
  bool begin_stores(ShmStep& step);
  void end(const OpContext& ctx) { fingerprints_.verify_all(ctx); }

  bool slot_free(uint64_t ticket) const;                   // every peer is done with its last use
  void acquire(uint64_t ticket, const OpContext& ctx);     // waits for slot_free
  void wait_done(uint64_t tickets, const OpContext& ctx);  // every peer's kDone >= tickets
  void publish(Counter c, uint64_t value) { segment_.publish(opt_.rank, c, value); }
  bool reached(Counter c, uint64_t value) const;  // every peer's counter is >= value
  void wait_for(int peer, Counter c, uint64_t value, const OpContext& ctx);
  void wait_all(Counter c, uint64_t value, const OpContext& ctx);

  // Blocking: true at once. Otherwise true when `ready` within the budget.
  template <typename Ready>
  bool poll(Ready ready, const ShmPoll& p) const {
    return p.block || wait_.spin(ready, p.budget_us);
  }

 private:
  // Peers whose counter is < value; one that entered another op is a mismatch (throws).
  std::vector<int> late(Counter c, uint64_t value, const OpContext& ctx);

  ShmSegment segment_;
  Options opt_;
  ShmWait wait_;
  ShmFingerprints fingerprints_;
  uint64_t ticket_ = 0;
  int small_half_ = 0;
};

// One chunk of a personalized exchange (see exchange_pieces): elements [off, off + m) of every
// rank's block, under ticket t; piece p of a rank's slot (piece elements) holds block p's.
struct PieceChunk {
  uint64_t t = 0;
  size_t off = 0;
  size_t m = 0;
  size_t piece = 0;
};

// A personalized exchange (all_to_all, reduce_scatter): s.in holds world blocks of `block`
// elements, block p meant for rank p. Chunk by chunk this rank stages its blocks' chunk for
// the peers in its slot (timed, the stores as rank 0 chose), then `take` reads what the
// peers staged for it; the chunk is then done.
void exchange_pieces(ShmChannel& ch, ShmStep& s, size_t block,
                     const std::function<void(const PieceChunk&)>& take);

}  // namespace ddp::comm::tcp
