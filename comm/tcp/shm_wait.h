#pragma once
// ShmWait: how a rank waits for its peers' counters in a group's shared memory.
// - spin(ready, budget): pause-spins for spin_us, then yields the core until the budget ends; at
//   once while crowded() (a peer last waited on our CPU, so it is queued behind us).
// - wait(ready, missing, ctx): spins for spin_us + yield_us (only while a thread is blocked on
//   the group's ops, Options::blocked), then futex-sleeps in bounded slices (ShmSegment::sleep),
//   checking GroupHealth (a failed group rethrows; an awaited peer that left is a NetworkError)
//   and the deadline (TimeoutError naming the ranks `missing()` returns). A failure recorded
//   meanwhile ends a spin, and a sleep at its next slice or at ShmSegment::wake (an abort).
//   Never returns without `ready()`.
// Called by one thread at a time. crowded() publishes this rank's CPU in its control block
// (only when it changed: peers poll that line).
#include <immintrin.h>
#include <sched.h>

#include <algorithm>
#include <atomic>
#include <vector>

#include "comm/tcp/op.h"
#include "comm/tcp/shm_segment.h"

namespace ddp::comm::tcp {

// Polls `ready` with the policy above; `crowded` says whether to yield instead of spinning.
// True when ready() became true within budget_us.
template <typename Ready, typename Crowded>
bool spin_until(Ready ready, Crowded crowded, int spin_us, int budget_us) {
  if (ready()) return true;
  if (budget_us <= 0) return false;
  // A peer a few hundred nanoseconds behind is the common case: poll before reading the clock.
  for (int i = 0; i < 64; ++i) {
    _mm_pause();
    if (ready()) return true;
  }
  const auto start = Clock::now();
  const auto spin_end = start + std::chrono::microseconds(std::min(spin_us, budget_us));
  const auto end = start + std::chrono::microseconds(budget_us);
  bool yield = crowded();
  for (unsigned i = 1;; ++i) {
    if (ready()) return true;
    if (yield) {
      sched_yield();
    } else {
      _mm_pause();
    }
    if ((i & 31) != 0) continue;
    const auto now = Clock::now();
    if (now >= end) return false;
    yield = now >= spin_end || crowded();
  }
}

class ShmWait {
 public:
  struct Options {
    int rank = 0;
    int world = 1;
    int spin_us = 200;     // busy-wait this long first (0 when ranks outnumber cores) ...
    int yield_us = 20000;  // ... then yield the core this long, then futex-sleep
    // Threads blocked on the group's ops (Work::wait): waits poll (spin, yield) only while one
    // is, and otherwise sleep at once, leaving the core to the computation that issued the op
    // (DDP's backward). nullptr: always poll.
    const std::atomic<int>* blocked = nullptr;
  };
  // `segment` and `health` outlive this object.
  ShmWait(const ShmSegment* segment, Options options, GroupHealth* health)
      : segment_(segment), opt_(options), health_(health) {}

  template <typename Ready>
  bool spin(Ready ready, int budget_us) const {
    return spin_until(
        ready, [this] { return crowded(); }, opt_.spin_us, budget_us);
  }

  template <typename Ready, typename Missing>
  void wait(Ready ready, Missing missing, const OpContext& ctx) const {
    const bool someone_waits = opt_.blocked == nullptr || opt_.blocked->load(std::memory_order_relaxed) > 0;
    // A failure recorded meanwhile (an abort: ShmSegment::wake) ends the spin too.
    if (spin([&] { return ready() || health_->broken(); },
             someone_waits ? opt_.spin_us + opt_.yield_us : 0) &&
        ready()) {
      return;
    }
    while (!ready()) {
      std::vector<int> late = missing();
      // A peer publishes before it says goodbye, but its goodbye can reach us between our read
      // of its counter and our look at its departure: once gone, its counters are final, so
      // look again before calling it gone.
      if (any_departed(late)) {
        if (ready()) return;
        late = missing();
      }
      check(late, ctx);
      SegmentHeader& h = segment_->header();
      h.waiters.fetch_add(1, std::memory_order_seq_cst);
      const uint32_t seen = h.futex.load(std::memory_order_seq_cst);
      // Health after `seen`: an abort that moved the futex word before this load is seen here.
      if (!ready() && !health_->broken()) sleep(seen, ctx);
      h.waiters.fetch_sub(1, std::memory_order_seq_cst);
    }
  }

  bool crowded() const;  // a peer waited on our CPU last
  const Options& options() const { return opt_; }

 private:
  bool any_departed(const std::vector<int>& ranks) const;
  // Throws when the group failed, a late rank left, or the op's deadline passed.
  void check(const std::vector<int>& late, const OpContext& ctx) const;
  void sleep(uint32_t seen, const OpContext& ctx) const;  // one bounded futex sleep

  const ShmSegment* segment_;
  Options opt_;
  GroupHealth* health_;
};

}  // namespace ddp::comm::tcp
