#pragma once
// Chunked shared-memory reductions that are not all_reduce:
// - reduce: reduce-scatter per chunk (each rank reduces its slice into its slot, or the root
//   into its buffer), then the root gathers the peers' reduced slices.
// - reduce_scatter: each rank stages, per chunk, the pieces of its input the peers own, then
//   reduces its own piece from its input and the peers' slots into its output.
// Blocking (step.poll.block must be true): they return true, done, or throw.
#include "comm/tcp/shm_channel.h"

namespace ddp::comm::tcp {

bool reduce_step(ShmChannel& ch, ShmStep& step);
bool reduce_scatter_step(ShmChannel& ch, ShmStep& step);

}  // namespace ddp::comm::tcp
