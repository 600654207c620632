#include "comm/tcp/shm_allreduce_cross.h"

#include "comm/tcp/shm_allreduce_chunked.h"
#include "comm/tcp/shm_allreduce_direct.h"
#include "comm/tcp/shm_cross.h"
#include "comm/tcp/shm_peer_buffers.h"

namespace ddp::comm::tcp {

bool allreduce_cross_step(ShmChannel& ch, ShmStep& s) {
  return cross_step(
      ch, s, [&] { return allreduce_chunked_step(ch, s); },
      [&] { reduce_share(ch, s, PeerBuffers::attached(ch, s)); });
}

}  // namespace ddp::comm::tcp
