#pragma once
// The vocabulary of the shared-memory collectives that run by cross-memory attach
// (cross_memory.h) on buffers private to each rank: shm_allreduce_cross.h (all_reduce) and
// shm_exchange_cross.h (all_gather, reduce_scatter).
//
// Every rank that can reach every peer (ShmCollectives checks at the group's creation) offers
// the op's input buffer (address and length) with its fingerprint (RankControl::cross). Rank 0's
// chooser for the op decides (StoreMode::kCross, published like the store modes): when it chose
// CMA and every rank offered a buffer of the same length, the op runs so (decide_cross: 1);
// otherwise by its staged algorithm with cached stores (-1). The copies name the peer when they
// fail: a process that is gone is a NetworkError; anything else a BackendError.
#include <cstddef>
#include <cstdint>

#include "comm/tcp/shm_channel.h"

namespace ddp::comm::tcp {

// Sets step.at.cross once rank 0's choice is known and, for CMA, every peer entered; false
// while not (a non-blocking poll).
bool decide_cross(ShmChannel& ch, ShmStep& step);

// Copies `bytes` at `offset` bytes into peer's offered buffer (op step's) into `local`, or from
// `local` to there.
void read_from_peer(const ShmChannel& ch, const ShmStep& step, int peer, size_t offset, void* local,
                    size_t bytes);
void write_to_peer(const ShmChannel& ch, const ShmStep& step, int peer, const void* local, size_t offset,
                   size_t bytes);

}  // namespace ddp::comm::tcp
