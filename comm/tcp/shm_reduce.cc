#include "comm/tcp/shm_reduce.h"

#include <algorithm>

#include "comm/copy_kernel.h"
#include "comm/reduce_kernels.h"

namespace ddp::comm::tcp {
namespace {

// Reduces this rank's slice `me` of the staged chunk t into dst: from `own` (this rank's data)
// and the peers' slots at `peer_off` bytes. dst may be `own`.
void reduce_slice(ShmChannel& ch, char* dst, const char* own, size_t peer_off, size_t n, DType dtype,
                  ReduceOp rop, uint64_t t) {
  bool first = true;
  for (int p = 0; p < ch.world(); ++p) {
    if (p == ch.rank()) continue;
    const char* src = ch.slot(p, t) + peer_off;
    if (first && dst != own) {
      combine3(dst, own, src, n, dtype, rop);
    } else {
      combine(dst, src, n, dtype, rop);
    }
    first = false;
  }
  if (rop == ReduceOp::kAvg) finish_avg(dst, n, dtype, ch.world());
}

}  // namespace

bool reduce_step(ShmChannel& ch, ShmStep& s) {
  const Buffer& buf = s.in;
  const size_t es = dtype_size(buf.dtype);
  const size_t chunk = ch.geometry().slot_bytes / es;
  const int r = ch.rank(), w = ch.world();
  const bool into_buf = r == s.ctx.desc.root;
  for (size_t off = 0; off < buf.count; off += chunk) {
    const size_t m = std::min(chunk, buf.count - off);
    const uint64_t t = ch.next_ticket();
    char* base = at(buf, off);
    char* mine = ch.slot(r, t);
    ch.acquire(t, s.ctx);
    for (int p = 0; p < w; ++p) {
      if (p == r) continue;
      const Part sl = part(m, w, p);
      copy_bytes(mine + sl.off * es, base + sl.off * es, sl.len * es);
    }
    ch.publish(Counter::kStaged, t + 1);
    const Part me = part(m, w, r);
    ch.wait_all(Counter::kStaged, t + 1, s.ctx);
    char* dst = (into_buf ? base : mine) + me.off * es;
    reduce_slice(ch, dst, base + me.off * es, me.off * es, me.len, buf.dtype, s.ctx.desc.rop, t);
    ch.publish(Counter::kReduced, t + 1);
    if (into_buf) {
      for (int p = 0; p < w; ++p) {
        if (p == r) continue;
        const Part sl = part(m, w, p);
        ch.wait_for(p, Counter::kReduced, t + 1, s.ctx);
        copy_bytes(base + sl.off * es, ch.slot(p, t) + sl.off * es, sl.len * es);
      }
    }
    ch.publish(Counter::kDone, t + 1);
  }
  return true;
}

bool reduce_scatter_step(ShmChannel& ch, ShmStep& s) {
  const Buffer &in = s.in, &out = s.out;
  const size_t es = dtype_size(out.dtype);
  const size_t n = out.count;
  const size_t r = static_cast<size_t>(ch.rank());
  exchange_pieces(ch, s, n, [&](const PieceChunk& c) {
    ch.wait_all(Counter::kStaged, c.t + 1, s.ctx);
    const char* own = at(in, r * n + c.off);
    timed(s.at, [&] {
      reduce_slice(ch, at(out, c.off), own, r * c.piece * es, c.m, out.dtype, s.ctx.desc.rop, c.t);
    });
  });
  return true;
}

}  // namespace ddp::comm::tcp
