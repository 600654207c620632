#pragma once
// reduce_scatter and all_gather of a buffer in group memory (ProcessGroup::allocate,
// shm_region.h) at the same place on every rank: in place, no staging, as the direct all_reduce
// (shm_allreduce_direct.h) runs. The buffer in group memory is reduce_scatter's input and
// all_gather's output; the other side may be anywhere, and is usually this rank's own block of
// it (a hierarchical all_reduce's steps within the host: hierarchical_collectives.h).
// - reduce_scatter: each rank reduces its block of every rank's input straight into its output,
//   a slot-sized chunk at a time (one pass; staging copies each peer's block into a slot first).
// - all_gather: each rank writes its input into its block of every rank's output (one copy per
//   peer; staging copies it into a slot, and each peer out of it again).
// Every rank enters first, and publishes its tag (DirectView): all tags equal, the pass; else
// every rank runs the op as a rank without a tag does from the start (reduce_scatter_cross_step,
// all_gather_cross_step: by cross-memory attach, or staged). Each rank returns once every rank's
// pass is done, so nobody reads or writes a buffer whose owner has moved on. reduce_scatter
// blocks, as its staged way does; all_gather polls until it is decided and through its pass.
#include "comm/tcp/shm_channel.h"

namespace ddp::comm::tcp {

bool reduce_scatter_direct_step(ShmChannel& ch, ShmStep& step);  // step.direct: the input's view
bool all_gather_direct_step(ShmChannel& ch, ShmStep& step);      // step.direct: the output's view

}  // namespace ddp::comm::tcp
