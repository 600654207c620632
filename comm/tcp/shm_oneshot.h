#pragma once
// One-shot shared-memory collectives: a message that fits one slot. The ranks that have data
// stage all of it, every rank waits for every rank, then takes what it needs from the slots.
// all_reduce reduces every slot in rank order (bitwise-identical results everywhere); also
// broadcast, all_gather and reduce_scatter whose input fits a slot, and barrier (counters only).
// An all_reduce of at most 8 bytes travels in the rank's control line (RankControl::small),
// written before kEntered: a peer takes value and counter in one cache miss, and the op takes
// no ticket and publishes nothing more. One of up to kWideBytes (and a broadcast of as much)
// travels in the lines right after it (RankControl::wide): one more miss, still no ticket. Their
// two halves serve such ops in turn, so a half is rewritten only after every peer read it, with
// no wait. Resumable: with a non-blocking ShmPoll, oneshot_step returns false at a wait that did
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
