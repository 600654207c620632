#pragma once
// One-shot shared-memory collectives: a message that fits one slot. The ranks that have data
// stage all of it, every rank waits for every rank, then takes what it needs from the slots.
// all_reduce reduces every slot in rank order (bitwise-identical results everywhere); also
// broadcast, all_gather and reduce_scatter whose input fits a slot, and barrier (counters
// only). An all_reduce of at most 8 bytes travels in the rank's control line, written by
// ShmChannel::begin before kEntered (RankControl::small): a peer takes value and counter in one
// cache miss, where a slot costs a second one (on far cores 230 ns), and the op takes no
// ticket and publishes nothing more (no kStaged, no kDone: each store to the line makes the
// peers fetch it again). One of up to kWideBytes travels the same way in the lines right after
// it (RankControl::wide): a peer reads them once it saw kEntered, one more miss for all of
// them (their loads overlap), and still no ticket, no kStaged, no kDone, no slot to free.
// Their two halves serve such ops in turn, so a half is rewritten only after every peer read
// it, with no wait (a single word had to wait for every peer to finish the last op: with 3
// ranks on 2 cores, 7.5 us against 4). A broadcast of up to kWideBytes travels the same way:
// only the root stages its value, and every rank still waits for every rank's kEntered, which
// keeps the halves' rule (2 ranks, 4 bytes: 0.46 us through a slot, against Open MPI's 0.24).
// Resumable: with a non-blocking ShmPoll, oneshot_step returns false at a wait that did
// not end within the budget, its place kept in step.at; a later call goes on from there.
#include "comm/tcp/shm_channel.h"

namespace ddp::comm::tcp {

// Whether `d` on `in` is an all_reduce or a broadcast of at most kWideBytes (staged by
// ShmChannel::begin).
bool oneshot_small(const OpDesc& d, const Buffer& in);

// Whether `d` on input `in` runs one-shot in a channel of this geometry.
bool oneshot_fits(const OpDesc& d, const Buffer& in, const ShmGeometry& g);

// True when the op completed.
bool oneshot_step(ShmChannel& ch, ShmStep& step);

}  // namespace ddp::comm::tcp
