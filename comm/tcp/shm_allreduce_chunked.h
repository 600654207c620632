#pragma once
// Chunked shared-memory all_reduce: reduce-scatter + all-gather in slot-sized chunks. For each
// chunk a rank stages the slices its peers reduce, reduces its own slice reading its buffer
// and the peers' slots, publishes the result in its slot, and copies the peers' reduced slices
// out. Staged data stays in cache, so memory sees one read and one write per byte. With
// ShmStep::stores streaming, what peers read (staged slices, the reduced slice) goes to memory
// instead (shm_store_choice.h: faster when the peers run on far cores); the time spent in
// copies and reductions is counted in ShmProgress::busy_ns for that choice.
// One wait per chunk: a peer publishes "staged" for chunk k only after it reduced chunk k-1,
// so that wait also says chunk k-1's reduced slices are ready, and chunk k-1 is copied out
// then; the last chunk's copy-out waits on "reduced". Resumable, like oneshot_step.
#include "comm/tcp/shm_channel.h"

namespace ddp::comm::tcp {

// True when the op completed.
bool allreduce_chunked_step(ShmChannel& ch, ShmStep& step);

}  // namespace ddp::comm::tcp
