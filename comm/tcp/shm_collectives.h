#pragma once
// ShmCollectives: every collective of a group whose ranks share one host, through the group's
// ShmSegment, by the algorithm plan() names. The pieces: shm_channel.h (the stage / publish /
// wait vocabulary: tickets, slots, counters; shm_wait.h, shm_fingerprint.h: a mismatched op is
// InvalidArgument naming both sides); one algorithm family per file (shm_oneshot.h,
// shm_allreduce_{chunked,direct,cross}.h, shm_exchange{,_cross,_direct}.h, shm_reduce.h; their
// one-pass reductions: shm_peer_buffers.h); shm_store_choice.h (cached or streaming stores, or
// cross-memory attach, learned per size class from the ops' own times).
// An op is steps of its algorithm until done: start() runs it as far as it gets, each wait on a
// peer polling at most budget_us; a resumable op that is not done keeps its place and finish()
// completes it (before any other op); run() is both, blocking. Called by one thread at a time
// (the group's worker, or a caller running an op inline while the worker is idle).
#include <memory>

#include "comm/tcp/op.h"
#include "comm/tcp/shm_segment.h"
#include "comm/tcp/shm_store_choice.h"
#include "comm/types.h"

namespace ddp::comm::tcp {

class ShmRegion;

class ShmCollectives {
 public:
  struct Options {
    int rank = 0;
    int world = 1;
    bool fingerprints = true;
    int spin_us = 200;     // busy-wait this long first (0 when ranks outnumber cores) ...
    int yield_us = 20000;  // ... then yield the core this long, then futex-sleep
    const std::atomic<int>* blocked = nullptr;  // poll only while > 0 (see ShmWait::Options)
    StoreSetting stores = StoreSetting::kAuto;  // DDP_TCP_SHM_STORES (shm_store_choice.h)
    CrossSetting cross = CrossSetting::kAuto;   // DDP_TCP_CMA (cross_memory.h)
  };
  ShmCollectives(ShmSegment segment, Options options, GroupHealth* health);
  ~ShmCollectives();
  ShmCollectives(const ShmCollectives&) = delete;
  ShmCollectives& operator=(const ShmCollectives&) = delete;

  // Whether start() may return before the op is done (only such ops may be started so).
  bool resumable(const OpDesc& d, const Buffer& in) const;
  // Buffers as ProcessGroup defines them (out unused where the op has none). True when done.
  bool start(const OpContext& ctx, const Buffer& in, const Buffer& out, int budget_us);
  void finish(const OpContext& ctx, const Buffer& in, const Buffer& out);  // the op start() left
  void run(const OpContext& ctx, const Buffer& in, const Buffer& out);

  const ShmSegment& segment() const;
  // Group memory (shm_region.h) whose all_reduces, reduce_scatters (input) and all_gathers
  // (output) may run direct (shm_allreduce_direct.h, shm_exchange_direct.h).
  // Any thread; the group keeps it only as long as its owner does.
  void add_region(const std::shared_ptr<ShmRegion>& region);
  uint64_t direct_runs() const;  // ops that ran direct (tests, benchmarks)
  uint64_t cross_runs() const;   // ops that ran by cross-memory attach (shm_cross.h)
  bool cross_reachable() const;  // every peer's memory was reachable at construction

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace ddp::comm::tcp
