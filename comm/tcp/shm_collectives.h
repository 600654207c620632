#pragma once
// ShmCollectives: every collective of a group whose ranks share one host, through the group's
// ShmSegment. It picks the algorithm for each op and runs it; the pieces live apart:
//
// - shm_channel.h: the stage / publish / wait vocabulary over the segment (tickets, slots,
//   counters), with shm_wait.h (spin, yield, futex-sleep; lost peers and deadlines) and
//   shm_fingerprint.h (every op's OpDesc is compared across ranks: a mismatch is
//   InvalidArgument naming both sides, and no rank runs more than one op ahead).
// - Algorithms, one family per file: shm_oneshot.h (an all_reduce up to oneshot_bytes;
//   broadcast, all_gather and reduce_scatter whose input fits a slot; barrier),
//   shm_allreduce_chunked.h (larger all_reduce: chunked reduce-scatter + all-gather),
//   shm_allreduce_direct.h (the same, of a buffer in group memory: in place, in one pass),
//   shm_allreduce_cross.h (the same pass over private buffers, by cross-memory attach:
//   shm_cross.h), shm_exchange_cross.h (all_gather and reduce_scatter so),
//   shm_exchange_direct.h (all_gather and reduce_scatter in group memory, in place),
//   shm_reduce.h (reduce, reduce_scatter), shm_exchange.h (broadcast, (all_)gather, scatter,
//   all_to_all).
// - shm_store_choice.h: whether a chunked all_reduce, all_gather or reduce_scatter stages with
//   cached or streaming stores, or runs by cross-memory attach (where every rank can reach every peer:
//   checked once, at construction, after every rank announced itself in the segment), learned per size class
//   from its own ops' times.
//
// One execution model: an op is steps of its algorithm until it is done. start() begins an op
// and runs it as far as it gets, each wait on a peer polling at most budget_us; a resumable op
// (resumable(): barrier, all_reduce, and the one-shot broadcast/all_gather/reduce_scatter) that
// is not done keeps its place, and finish() completes it (before any other op). run() is
// start + finish, blocking. Called by one thread at a time (the group's worker, or a caller
// running an op inline while the worker is idle).
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
