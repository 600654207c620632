#pragma once
// Chunked shared-memory collectives that move data without reducing it: broadcast (the root
// stages, the others copy), all_gather and gather (every rank stages its input; receivers copy
// every slot), scatter (the root stages each rank's piece) and all_to_all (every rank stages
// the pieces each peer owns). Chunks are slot-sized; scatter and all_to_all split a slot in
// world-size pieces. Blocking (step.poll.block must be true): they return true, or throw.
#include "comm/tcp/shm_channel.h"

namespace ddp::comm::tcp {

bool broadcast_step(ShmChannel& ch, ShmStep& step);
bool all_gather_step(ShmChannel& ch, ShmStep& step);  // kAllGather, or kGather to the root
bool scatter_step(ShmChannel& ch, ShmStep& step);
bool all_to_all_step(ShmChannel& ch, ShmStep& step);

}  // namespace ddp::comm::tcp
