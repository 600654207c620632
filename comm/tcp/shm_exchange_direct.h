#pragma once
// reduce_scatter and all_gather of a buffer in group memory (ProcessGroup::allocate,
// shm_region.h) at the same place on every rank, in place, as the direct all_reduce
// (shm_allreduce_direct.h) runs: the buffer is reduce_scatter's input and all_gather's output;
// the other side may be anywhere, usually this rank's block of it (hierarchical_collectives.h).
// reduce_scatter reduces this rank's block of every rank's input straight into its output, a
// slot-sized chunk at a time; all_gather writes its input into its block of every rank's output.
// Every rank enters first and publishes its tag (DirectView): all tags equal, the pass; else
// every rank runs the op as a rank without a tag does (reduce_scatter_cross_step,
// all_gather_cross_step). Each rank returns once every rank's pass is done, so nobody touches a
// buffer whose owner has moved on. reduce_scatter blocks; all_gather polls through its pass.
#include "comm/tcp/shm_channel.h"

namespace ddp::comm::tcp {

bool reduce_scatter_direct_step(ShmChannel& ch, ShmStep& step);  // step.direct: the input's view
bool all_gather_direct_step(ShmChannel& ch, ShmStep& step);      // step.direct: the output's view

}  // namespace ddp::comm::tcp
