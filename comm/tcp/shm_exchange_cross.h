#pragma once
// all_gather and reduce_scatter over buffers private to each rank, by cross-memory attach
// (shm_cross.h), when rank 0's chooser for the op takes it and every rank offered its input:
// all_gather reads every peer's input straight into this rank's output block (one kernel copy
// per element, where staging copies into a slot and out again); reduce_scatter reads its block
// of every peer's input a slot-sized chunk at a time into a scratch buffer and reduces it into
// its output. Each rank returns once every rank has read what it needed from it. Otherwise the
// op runs staged with cached stores (shm_exchange.h, shm_reduce.h). reduce_scatter blocks;
// all_gather polls until decided and through its pass, so it starts on the caller's thread as
// an all_reduce does (a hand-off to the worker costs a wake-up). An all_gather whose input
// fits a slot takes the same pass from a page up (all_gather_oneshot_cross_step), else runs
// one-shot (shm_oneshot.h); resumable, as that is.
#include "comm/tcp/shm_channel.h"

namespace ddp::comm::tcp {

bool all_gather_cross_step(ShmChannel& ch, ShmStep& step);          // kAllGather
bool all_gather_oneshot_cross_step(ShmChannel& ch, ShmStep& step);  // kAllGather, input <= a slot
bool reduce_scatter_cross_step(ShmChannel& ch, ShmStep& step);      // step.scratch: a slot's bytes at least

}  // namespace ddp::comm::tcp
