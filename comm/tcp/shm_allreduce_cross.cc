#include "comm/tcp/shm_allreduce_cross.h"

#include <algorithm>

#include "comm/reduce_kernels.h"
#include "comm/tcp/shm_allreduce_chunked.h"
#include "comm/tcp/shm_allreduce_direct.h"
#include "comm/tcp/shm_cross.h"

namespace ddp::comm::tcp {
namespace {

// Reduces this rank's share from every rank's buffer and writes it into all of them.
void reduce_share_cross(const ShmChannel& ch, const ShmStep& s) {
  const Buffer& buf = s.in;
  const size_t es = dtype_size(buf.dtype);
  const ReduceOp rop = s.ctx.desc.rop;
  const Part me = part(buf.count, ch.world(), ch.rank());
  const size_t chunk = std::max<size_t>(1, std::min(ch.geometry().slot_bytes, s.scratch.size()) / es);
  for (size_t off = me.off; off < me.off + me.len; off += chunk) {
    const size_t n = std::min(chunk, me.off + me.len - off);
    char* dst = at(buf, off);
    for (int p = 0; p < ch.world(); ++p) {
      if (p == ch.rank()) continue;
      read_from_peer(ch, s, p, off * es, s.scratch.data(), n * es);
      combine(dst, s.scratch.data(), n, buf.dtype, rop);
    }
    if (rop == ReduceOp::kAvg) finish_avg(dst, n, buf.dtype, ch.world());
    for (int p = 0; p < ch.world(); ++p) {
      if (p != ch.rank()) write_to_peer(ch, s, p, dst, off * es, n * es);
    }
  }
}

}  // namespace

bool allreduce_cross_step(ShmChannel& ch, ShmStep& s) {
  return cross_step(
      ch, s, [&] { return allreduce_chunked_step(ch, s); }, [&] { reduce_share_cross(ch, s); });
}

}  // namespace ddp::comm::tcp
