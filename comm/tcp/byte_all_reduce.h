#pragma once
// all_reduce written once over a ByteTransport (byte_transport.h), for any medium with ordered
// pairwise messages; plan.h picks one. Each value is reduced by one rank in a fixed order: every
// rank gets the same bits. Each pipelines its messages in chunks of the transport's
// chunk_bytes(), so transfers overlap the reductions:
// - direct: reduce-scatter + all-gather with every peer at once (2 rounds);
// - ring: the same bytes, each rank streaming to one neighbour, from the other;
// - hd: recursive halving then doubling (Rabenseifner), 2 log2(world) rounds.
// Errors: the transport's (a lost peer, a TimeoutError naming the late ranks).
#include <cstddef>
#include <vector>

#include "comm/tcp/byte_transport.h"

namespace ddp::comm::tcp {

// Kept between ops by the transport's owner: buffers the algorithms reuse.
struct ByteScratch {
  std::vector<std::vector<char>> per_peer;  // direct: each peer's contributions to this rank's part
  std::vector<char> incoming;               // ring and hd: incoming chunks to reduce
};

void direct_all_reduce(ByteTransport& t, ByteScratch& scratch, const OpContext& ctx, const Buffer& buf);
void ring_all_reduce(ByteTransport& t, ByteScratch& scratch, const OpContext& ctx, const Buffer& buf);
void hd_all_reduce(ByteTransport& t, ByteScratch& scratch, const OpContext& ctx, const Buffer& buf);

// One step of recursive halving for virtual rank `vrank` of `p2` (a power of two) over `count`
// elements: the partner (a virtual rank), the range given to it and the range kept (reduced with
// the partner's copy of it). Nearest partner first (distance 1, 2, 4, ...): ranks are numbered
// host by host (ddp-launch, torchrun, mpirun by slot), so the largest exchange, half the buffer,
// stays within the host where a rank's neighbour is on it, and those that cross hosts are the
// smaller ones. Doubling walks the steps back, each sending the range kept and receiving the
// range given. A pure function: partners' plans mirror each other.
struct HalvingStep {
  int partner = 0;
  size_t give_off = 0, give_len = 0, keep_off = 0, keep_len = 0;
};
std::vector<HalvingStep> halving_plan(size_t count, int vrank, int p2);

}  // namespace ddp::comm::tcp
