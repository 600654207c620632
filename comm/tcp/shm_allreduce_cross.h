#pragma once
// Cross-memory all_reduce: the direct algorithm's one pass (shm_allreduce_direct.h) over
// buffers private to each rank, through cross-memory attach (cross_memory.h) instead of a
// shared mapping. Each rank reduces its share (part()) a chunk at a time: it reads each peer's
// copy of the chunk into a scratch buffer of a slot's size (in its cache), reduces it into its
// own buffer, and writes the result into every peer's buffer; it returns once every rank has
// written its share. Each element is read once from each rank and written once to each, where
// the chunked algorithm also copies it into and out of the slots.
//
// Whether an op runs so is decided as for every cross-memory collective (shm_cross.h);
// otherwise it runs as the chunked algorithm (with cached stores). Resumable, like the chunked
// one.
#include "comm/tcp/shm_channel.h"

namespace ddp::comm::tcp {

// True when the op completed. step.scratch holds a slot's bytes at least.
bool allreduce_cross_step(ShmChannel& ch, ShmStep& step);

}  // namespace ddp::comm::tcp
