#pragma once
// plan(): the one place the tcp backend chooses how a collective runs. From the group's host
// layout, its settings and what its set-up found (GroupFacts), and the op, its size and where its
// buffer lives (OpFacts), it gives the medium (the group's Transport) and the algorithm; every
// input but where the buffer lives is equal on every rank, so every rank plans alike. The
// choosers (chooser.h) only tune what a plan leaves open: the store mode of the shared-memory
// algorithms that name a StoreSlot, the way of a hierarchical large all_reduce, and the
// hierarchical small path's limit (GroupFacts::hierarchy_small_bytes). docs/tcp.md has the rules.
#include <cstddef>
#include <cstdint>

#include "comm/tcp/op.h"

namespace ddp::comm::tcp {

enum class TransportKind : uint8_t { kLocal, kShm, kSocket, kHierarchical };
const char* to_string(TransportKind t);

// DDP_TCP_TRANSPORT's choices, in the table's order (settings::choice_as).
enum class TransportSetting : uint8_t { kAuto, kShm, kSocket, kHierarchical };
// DDP_TCP_SOCKET_ALGO's choices, in the table's order (settings::choice_as).
enum class SocketAlgo : uint8_t { kAuto, kDirect, kHalvingDoubling, kRing };
const char* to_string(SocketAlgo algo);  // its choice's text

// Every algorithm, by medium (each family's file says how it runs).
enum class Algorithm : uint8_t {
  kNone,  // no op was given: the medium alone
  kCopy,  // one rank: a copy at most (transport.cc)
  // Shared memory (shm_collectives.h).
  kShmOneshot,                // every op that fits a slot, and barrier (shm_oneshot.h)
  kShmAllGatherOneshotCross,  // a one-shot all_gather read by cross-memory attach (shm_exchange_cross.h)
  kShmAllReduceChunked,       // shm_allreduce_chunked.h
  kShmAllReduceDirect,        // in group memory (shm_allreduce_direct.h)
  kShmAllReduceCross,         // shm_allreduce_cross.h
  kShmReduce,                 // shm_reduce.h
  kShmBroadcast,              // shm_exchange.h, with the next four
  kShmAllGather,              // all_gather and gather
  kShmScatter,
  kShmReduceScatter,
  kShmAllToAll,
  kShmAllGatherDirect,  // in group memory (shm_exchange_direct.h)
  kShmReduceScatterDirect,
  kShmAllGatherCross,  // by cross-memory attach (shm_exchange_cross.h)
  kShmReduceScatterCross,
  // Sockets (socket_collectives.h): all_reduce's four, and every other op's one.
  kSocketOneshot,
  kSocketDirect,
  kSocketRing,
  kSocketHalvingDoubling,
  kSocketOp,
  // Hierarchical (hierarchical_collectives.h).
  kHierarchicalSmall,    // all_reduce up to the small limit, and barrier: within the host, then across
  kHierarchicalLarge,    // above it: split, overlapped or flat, as hierarchy_choice.h measures
  kHierarchicalTwoStep,  // every op but all_reduce, barrier, all_to_all: a step across, a step within
  kHierarchicalFlat,     // all_to_all: the group's own sockets
};
const char* to_string(Algorithm a);

// Which shared-memory store chooser (shm_store_choice.h) tunes an algorithm: one per algorithm
// family whose ranks all write and all read.
enum class StoreSlot : uint8_t { kNone, kAllReduce, kAllGather, kReduceScatter, kAllToAll };

struct GroupFacts {
  int world = 1;
  int hosts = 1;     // HostLayout::hosts
  int per_host = 1;  // HostLayout::per_host (0: hosts hold different numbers of ranks)
  TransportSetting wanted = TransportSetting::kAuto;
  bool shm_ok = true;  // every rank mapped the group's segment (a single host only)
  // Shared memory: the segment's geometry (ShmGeometry), and whether this rank reaches every
  // peer's memory (cross-memory attach; the one fact a rank may not share: a peer that cannot
  // declines the op's offer, shm_channel.h).
  size_t shm_oneshot_bytes = 0, shm_slot_bytes = 0;
  bool cross = false;
  // Sockets (SocketCollectives::Options).
  size_t socket_oneshot_bytes = 64 << 10, socket_chunk_bytes = 256 << 10;
  SocketAlgo socket_algo = SocketAlgo::kAuto;
  size_t hierarchy_small_bytes = 64 << 10;  // measured at creation unless set
};

struct OpFacts {
  OpKind kind = OpKind::kBarrier;
  size_t bytes = 0;  // of the input (all_gather, gather: this rank's block)
  size_t count = 0;  // elements of the input
  // Whether the op's buffer (all_reduce, reduce_scatter: the input; all_gather: the output)
  // lies in group memory (shm_region.h). Asked only where a direct algorithm could run, since
  // looking costs; `self` is the caller's, which may keep what it found.
  bool (*in_group_memory)(void* self) = nullptr;
  void* self = nullptr;
};

struct Plan {
  TransportKind medium = TransportKind::kLocal;
  Algorithm algorithm = Algorithm::kNone;
  bool offer_cross = false;  // shared memory: the input is offered to cross-memory attach
  StoreSlot stores = StoreSlot::kNone;
};

// `op` null: the medium alone (the group's, at set-up).
Plan plan(const GroupFacts& group, const OpFacts* op);
inline Plan plan(const GroupFacts& group, const OpFacts& op) { return plan(group, &op); }

// A shared-memory plan that may pause at a wait and resume (started on the caller's thread,
// finished by the group's worker): the all_reduces and one-shots, and an all_gather offered to
// cross-memory attach.
bool shm_resumable(const Plan& p);

}  // namespace ddp::comm::tcp
