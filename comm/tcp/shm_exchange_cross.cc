#include "comm/tcp/shm_exchange_cross.h"

#include <algorithm>

#include "comm/copy_kernel.h"
#include "comm/reduce_kernels.h"
#include "comm/tcp/shm_allreduce_direct.h"
#include "comm/tcp/shm_cross.h"
#include "comm/tcp/shm_exchange.h"
#include "comm/tcp/shm_oneshot.h"
#include "comm/tcp/shm_peer_buffers.h"
#include "comm/tcp/shm_reduce.h"

namespace ddp::comm::tcp {
namespace {

// Every rank's input into this rank's output, in rank order.
void gather_all(const ShmChannel& ch, const ShmStep& s) {
  const Buffer &in = s.in, &out = s.out;
  const size_t bytes = in.bytes();
  for (int p = 0; p < ch.world(); ++p) {
    char* dst = at(out, static_cast<size_t>(p) * in.count);
    if (p != ch.rank()) {
      read_from_peer(ch, s, p, 0, dst, bytes);
    } else if (dst != in.data) {
      copy_bytes(dst, in.data, bytes);
    }
  }
}

}  // namespace

bool all_gather_cross_step(ShmChannel& ch, ShmStep& s) {
  // Declined: staged, which blocks, so on the worker.
  return cross_step(
      ch, s, [&] { return s.poll.block && all_gather_step(ch, s); }, [&] { gather_all(ch, s); });
}

bool all_gather_oneshot_cross_step(ShmChannel& ch, ShmStep& s) {
  return cross_step(
      ch, s, [&] { return oneshot_step(ch, s); }, [&] { gather_all(ch, s); });
}

bool reduce_scatter_cross_step(ShmChannel& ch, ShmStep& s) {
  return cross_step(
      ch, s, [&] { return reduce_scatter_step(ch, s); },
      [&] { reduce_block(ch, s, PeerBuffers::attached(ch, s)); });
}

}  // namespace ddp::comm::tcp
