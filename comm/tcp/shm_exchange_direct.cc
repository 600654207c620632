#include "comm/tcp/shm_exchange_direct.h"

#include "comm/tcp/shm_allreduce_direct.h"
#include "comm/tcp/shm_exchange_cross.h"
#include "comm/tcp/shm_peer_buffers.h"

namespace ddp::comm::tcp {

bool reduce_scatter_direct_step(ShmChannel& ch, ShmStep& s) {
  return direct_step(
      ch, s, [&] { return reduce_scatter_cross_step(ch, s); },
      [&] { reduce_block(ch, s, PeerBuffers::mapped(ch, s)); });
}

bool all_gather_direct_step(ShmChannel& ch, ShmStep& s) {
  return direct_step(
      ch, s, [&] { return all_gather_cross_step(ch, s); },
      [&] { scatter_own(ch, s, PeerBuffers::mapped(ch, s)); });
}

}  // namespace ddp::comm::tcp
