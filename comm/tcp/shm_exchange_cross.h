#pragma once
// all_gather and reduce_scatter over buffers private to each rank, by cross-memory attach
// (shm_cross.h), when rank 0's chooser for the op takes it and every rank offered its input:
// - all_gather: each rank reads every peer's input straight into its own output block, one
//   kernel copy per element, where staging copies it into a slot and out again;
// - reduce_scatter: each rank reads its block of every peer's input, a slot-sized chunk at a
//   time, into a scratch buffer (in its cache) and reduces it into its output.
// Each rank returns once every rank has read what it needed from it. Otherwise the op runs as
// all_gather_step / reduce_scatter_step (shm_exchange.h, shm_reduce.h) with cached stores.
// reduce_scatter blocks, as those do. all_gather polls until it is decided and through its pass,
// so it starts on the caller's thread (up to DDP_TCP_INLINE_MAX_BYTES) as an all_reduce does;
// only its staged way blocks, and it waits for the worker (a poll returns false first): the
// hand-off to the worker cost 2 ranks' all_gather of 1 MiB 56 us against Open MPI's 49, 47
// against 46 inline (2-vCPU VM).
// An all_gather whose input fits a slot (a one-shot one, shm_oneshot.h) takes the same pass
// from a page up (all_gather_oneshot_cross_step), or else runs one-shot; resumable, as that
// is. 2 ranks on the 2-vCPU VM, 64 KiB gathered in 3.7 us against 6.0 one-shot (Open MPI 4.2),
// 256 KiB 9.7 against 21 (Open MPI 10.0).
#include "comm/tcp/shm_channel.h"

namespace ddp::comm::tcp {

bool all_gather_cross_step(ShmChannel& ch, ShmStep& step);          // kAllGather
bool all_gather_oneshot_cross_step(ShmChannel& ch, ShmStep& step);  // kAllGather, input <= a slot
bool reduce_scatter_cross_step(ShmChannel& ch, ShmStep& step);      // step.scratch: a slot's bytes at least

}  // namespace ddp::comm::tcp
