#pragma once
// The engine's small bookkeeping collectives (verification hashes, join votes) on host values,
// on every backend. A group whose buffers must live on a GPU (nccl: ProcessGroup::buffer_device)
// gets them staged through device memory; other groups take the host views directly.
// Blocking: each returns when the collective is complete; errors are the group's.
#include "comm/process_group.h"

namespace ddp {

void all_reduce_host(comm::ProcessGroup& group, const comm::Buffer& values, comm::ReduceOp op);
void all_gather_host(comm::ProcessGroup& group, const comm::Buffer& input, const comm::Buffer& output);
void broadcast_host(comm::ProcessGroup& group, const comm::Buffer& values, int root);

}  // namespace ddp
