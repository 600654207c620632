#include "comm/tcp/plan.h"

#include "common/settings.h"

namespace ddp::comm::tcp {
namespace {

static_assert(settings::choices_are(settings::kTcpTransport, "auto|shm|socket|hierarchical"));
static_assert(settings::choices_are(settings::kTcpSocketAlgo, "auto|direct|hd|ring"));

// Below a page, a one-shot all_gather's cross-memory calls and handshake cost more than the
// copies they save.
constexpr size_t kPageBytes = 4096;

// One host: shared memory (where every rank mapped it). Several, with several ranks on each
// (the same number): shared memory within, sockets between. Otherwise sockets.
TransportKind medium(const GroupFacts& g) {
  if (g.world <= 1) return TransportKind::kLocal;
  if (g.wanted == TransportSetting::kSocket) return TransportKind::kSocket;
  if (g.hosts == 1) return g.shm_ok ? TransportKind::kShm : TransportKind::kSocket;
  if (g.per_host > 1) return TransportKind::kHierarchical;
  return TransportKind::kSocket;
}

// An op that fits one slot runs one-shot (shm_oneshot.h).
bool shm_oneshot_fits(const GroupFacts& g, const OpFacts& op) {
  switch (op.kind) {
    case OpKind::kBarrier: return true;
    case OpKind::kAllReduce: return op.bytes <= g.shm_oneshot_bytes;
    case OpKind::kBroadcast:
    case OpKind::kAllGather:
    case OpKind::kReduceScatter: return op.bytes <= g.shm_slot_bytes;  // no extra work one-shot
    default: return false;
  }
}

bool in_group_memory(const OpFacts& op) {
  return op.in_group_memory != nullptr && op.in_group_memory(op.self);
}

// The staged algorithm, or where the buffer lies in group memory (every rank's at the same
// place, which the op checks) the direct one; each, where this rank reaches every peer's
// memory, offers its input to cross-memory attach.
Plan plan_shm(const GroupFacts& g, const OpFacts& op) {
  Plan p{.medium = TransportKind::kShm};
  const bool cross = g.cross;
  if (shm_oneshot_fits(g, op)) {
    p.offer_cross = cross && op.kind == OpKind::kAllGather && op.bytes >= kPageBytes;
    p.algorithm = p.offer_cross ? Algorithm::kShmAllGatherOneshotCross : Algorithm::kShmOneshot;
    if (p.offer_cross) p.stores = StoreSlot::kAllGather;
    return p;
  }
  switch (op.kind) {
    case OpKind::kAllReduce:
      p.offer_cross = cross;
      if (in_group_memory(op)) {
        p.algorithm = Algorithm::kShmAllReduceDirect;  // falls back to cross itself
      } else {
        p.algorithm = cross ? Algorithm::kShmAllReduceCross : Algorithm::kShmAllReduceChunked;
        p.stores = StoreSlot::kAllReduce;
      }
      return p;
    case OpKind::kAllGather:
    case OpKind::kReduceScatter: {
      const bool gathers = op.kind == OpKind::kAllGather;
      p.offer_cross = cross;
      if (in_group_memory(op)) {
        p.algorithm = gathers ? Algorithm::kShmAllGatherDirect : Algorithm::kShmReduceScatterDirect;
        return p;
      }
      p.stores = gathers ? StoreSlot::kAllGather : StoreSlot::kReduceScatter;
      if (gathers) p.algorithm = cross ? Algorithm::kShmAllGatherCross : Algorithm::kShmAllGather;
      if (!gathers) p.algorithm = cross ? Algorithm::kShmReduceScatterCross : Algorithm::kShmReduceScatter;
      return p;
    }
    case OpKind::kReduce: p.algorithm = Algorithm::kShmReduce; return p;
    case OpKind::kBroadcast: p.algorithm = Algorithm::kShmBroadcast; return p;
    case OpKind::kGather: p.algorithm = Algorithm::kShmAllGather; return p;
    case OpKind::kScatter: p.algorithm = Algorithm::kShmScatter; return p;
    case OpKind::kAllToAll:
      p.algorithm = Algorithm::kShmAllToAll;
      p.stores = StoreSlot::kAllToAll;
      return p;
    case OpKind::kBarrier: break;  // one-shot
  }
  p.algorithm = Algorithm::kShmOneshot;
  return p;
}

// The all_reduce rule counts messages and rounds, never a timing (docs/tcp.md):
// - one-shot (every buffer to every peer) when small, or with fewer elements than ranks;
// - 2 or 3 ranks: direct (with 2 every algorithm sends the same messages; with 3, hd's fold
//   doubles one pair's traffic and the ring takes 4 rounds for direct's 2);
// - each rank's part under one pipeline chunk: the messages are small, so their number
//   decides: hd sends 2*log2(world) (+2 folding) per rank, direct and ring 2*(world - 1);
// - larger: ring. Same bytes per rank as direct, but each rank streams to one neighbour and
//   from the other, so no NIC takes world - 1 senders at once; parts of at least a chunk keep
//   the ring's pipeline full, hiding its 2*(world - 1) rounds.
Algorithm socket_all_reduce(const GroupFacts& g, const OpFacts& op) {
  const auto world = static_cast<size_t>(g.world);
  if (op.count < world || op.bytes <= g.socket_oneshot_bytes) return Algorithm::kSocketOneshot;
  switch (g.socket_algo) {
    case SocketAlgo::kDirect: return Algorithm::kSocketDirect;
    case SocketAlgo::kHalvingDoubling: return Algorithm::kSocketHalvingDoubling;
    case SocketAlgo::kRing: return Algorithm::kSocketRing;
    case SocketAlgo::kAuto: break;
  }
  if (world <= 3) return Algorithm::kSocketDirect;
  if (op.bytes / world < g.socket_chunk_bytes) return Algorithm::kSocketHalvingDoubling;
  return Algorithm::kSocketRing;
}

Algorithm hierarchical(const GroupFacts& g, const OpFacts& op) {
  switch (op.kind) {
    case OpKind::kAllReduce:
      return op.bytes <= g.hierarchy_small_bytes ? Algorithm::kHierarchicalSmall
                                                 : Algorithm::kHierarchicalLarge;
    case OpKind::kBarrier: return Algorithm::kHierarchicalSmall;  // of a token
    case OpKind::kAllToAll: return Algorithm::kHierarchicalFlat;
    default: return Algorithm::kHierarchicalTwoStep;
  }
}

}  // namespace

const char* to_string(TransportKind t) {
  switch (t) {
    case TransportKind::kLocal: return "local";
    case TransportKind::kShm: return "shm";
    case TransportKind::kSocket: return "socket";
    case TransportKind::kHierarchical: return "hierarchical";
  }
  return "unknown";
}

const char* to_string(SocketAlgo algo) {
  switch (algo) {
    case SocketAlgo::kAuto: return "auto";
    case SocketAlgo::kDirect: return "direct";
    case SocketAlgo::kHalvingDoubling: return "hd";
    case SocketAlgo::kRing: return "ring";
  }
  return "?";
}

const char* to_string(Algorithm a) {
  switch (a) {
    case Algorithm::kNone: return "none";
    case Algorithm::kCopy: return "copy";
    case Algorithm::kShmOneshot: return "shm one-shot";
    case Algorithm::kShmAllGatherOneshotCross: return "shm one-shot all_gather, cross-memory";
    case Algorithm::kShmAllReduceChunked: return "shm chunked all_reduce";
    case Algorithm::kShmAllReduceDirect: return "shm direct all_reduce";
    case Algorithm::kShmAllReduceCross: return "shm cross-memory all_reduce";
    case Algorithm::kShmReduce: return "shm reduce";
    case Algorithm::kShmBroadcast: return "shm broadcast";
    case Algorithm::kShmAllGather: return "shm all_gather";
    case Algorithm::kShmScatter: return "shm scatter";
    case Algorithm::kShmReduceScatter: return "shm reduce_scatter";
    case Algorithm::kShmAllToAll: return "shm all_to_all";
    case Algorithm::kShmAllGatherDirect: return "shm direct all_gather";
    case Algorithm::kShmReduceScatterDirect: return "shm direct reduce_scatter";
    case Algorithm::kShmAllGatherCross: return "shm cross-memory all_gather";
    case Algorithm::kShmReduceScatterCross: return "shm cross-memory reduce_scatter";
    case Algorithm::kSocketOneshot: return "socket one-shot";
    case Algorithm::kSocketDirect: return "socket direct";
    case Algorithm::kSocketRing: return "socket ring";
    case Algorithm::kSocketHalvingDoubling: return "socket hd";
    case Algorithm::kSocketOp: return "socket op";
    case Algorithm::kHierarchicalSmall: return "hierarchical small";
    case Algorithm::kHierarchicalLarge: return "hierarchical large";
    case Algorithm::kHierarchicalTwoStep: return "hierarchical two-step";
    case Algorithm::kHierarchicalFlat: return "hierarchical flat";
  }
  return "?";
}

Plan plan(const GroupFacts& group, const OpFacts* op) {
  const TransportKind m = medium(group);
  if (op == nullptr) return {.medium = m};
  switch (m) {
    case TransportKind::kLocal: return {.medium = m, .algorithm = Algorithm::kCopy};
    case TransportKind::kShm: return plan_shm(group, *op);
    case TransportKind::kSocket: {
      const bool reduces = op->kind == OpKind::kAllReduce;
      return {.medium = m, .algorithm = reduces ? socket_all_reduce(group, *op) : Algorithm::kSocketOp};
    }
    case TransportKind::kHierarchical: return {.medium = m, .algorithm = hierarchical(group, *op)};
  }
  return {.medium = m};
}

bool shm_resumable(const Plan& p) {
  switch (p.algorithm) {
    case Algorithm::kShmOneshot:
    case Algorithm::kShmAllGatherOneshotCross:
    case Algorithm::kShmAllReduceChunked:
    case Algorithm::kShmAllReduceDirect:
    case Algorithm::kShmAllReduceCross:
    case Algorithm::kShmAllGatherCross: return true;
    case Algorithm::kShmAllGatherDirect: return p.offer_cross;  // polls until its offer is decided
    default: return false;
  }
}

}  // namespace ddp::comm::tcp
