#pragma once
// Direct shared-memory all_reduce: for a buffer in the group's memory (ProcessGroup::allocate,
// shm_region.h) at the same place on every rank. One pass and no staging: each rank reduces
// its share of the buffer (part()) straight from every rank's copy and writes the result into
// all of them, a chunk at a time (the chunk still in its cache when copied out); it returns
// once every rank has written its share. Each element is read once from each rank and written
// once to each, where the chunked algorithm also copies it through the slots.
//
// Whether every rank's buffer is such a view is known only once all have entered the op: each
// publishes a tag (DirectView) with its fingerprint, 0 when its buffer is not in group memory.
// A rank with a tag waits for every peer to enter; all tags equal: the direct pass; else the
// op runs allreduce_cross_step (cross-memory, or the chunked algorithm), as a rank without a
// tag does from the start. Resumable, like the chunked one.
#include <functional>

#include "comm/tcp/shm_channel.h"

namespace ddp::comm::tcp {

// True when the op completed. step.direct is this rank's view (non-null).
bool allreduce_direct_step(ShmChannel& ch, ShmStep& step);

// Whether the op runs direct (every direct step's start): sets step.at.direct to kTaken once every
// peer entered the op with step.direct's tag, kDeclined when some peer's differs (the same answer on
// every rank); false while a non-blocking poll gives up.
bool decide_direct(ShmChannel& ch, ShmStep& step);

// The pass every one-pass algorithm shares (this, and the cross-memory ones: shm_cross.h): a
// ticket (its slots unused), `reduce_share` (this rank's part of the op: its share reduced and
// written into every rank's buffer, its blocks read), the counters that keep later ops in step,
// and the wait for every peer's part, so that nobody returns while a peer may still read or
// write its buffer. Resumable.
bool in_place_pass(ShmChannel& ch, ShmStep& step, const std::function<void()>& reduce_share);

// The step of a one-pass algorithm: its way decided first (decide_direct, or decide_cross with
// the pass timed: shm_cross.h); false while a poll leaves it undecided. Declined: `fallback`
// (the next algorithm's step); taken: in_place_pass(reduce_share).
bool direct_step(ShmChannel& ch, ShmStep& step, const std::function<bool()>& fallback,
                 const std::function<void()>& reduce_share);
bool cross_step(ShmChannel& ch, ShmStep& step, const std::function<bool()>& fallback,
                const std::function<void()>& reduce_share);

}  // namespace ddp::comm::tcp
