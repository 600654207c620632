#include "comm/tcp/shm_exchange.h"

#include <algorithm>

#include "comm/copy_kernel.h"

namespace ddp::comm::tcp {

bool broadcast_step(ShmChannel& ch, ShmStep& s) {
  const Buffer& buf = s.in;
  const size_t es = dtype_size(buf.dtype);
  const size_t chunk = ch.geometry().slot_bytes / es;
  const int root = s.ctx.desc.root;
  for (size_t off = 0; off < buf.count; off += chunk) {
    const size_t m = std::min(chunk, buf.count - off);
    const uint64_t t = ch.next_ticket();
    if (ch.rank() == root) {
      ch.acquire(t, s.ctx);
      copy_bytes(ch.slot(root, t), at(buf, off), m * es);
      ch.publish(Counter::kStaged, t + 1);
    } else {
      ch.wait_for(root, Counter::kStaged, t + 1, s.ctx);
      copy_bytes(at(buf, off), ch.slot(root, t), m * es);
    }
    ch.publish(Counter::kDone, t + 1);
  }
  return true;
}

bool all_gather_step(ShmChannel& ch, ShmStep& s) {
  const Buffer &in = s.in, &out = s.out;
  const size_t es = dtype_size(in.dtype);
  const size_t chunk = ch.geometry().slot_bytes / es;
  const size_t n = in.count;
  const int r = ch.rank();
  const bool all = s.ctx.desc.kind == OpKind::kAllGather;
  const bool receives = all || r == s.ctx.desc.root;
  ShmProgress& st = s.at;
  if (all) ch.begin_stores(s);  // blocking: true (gather keeps cached stores: one reader)
  for (size_t off = 0; off < n; off += chunk) {
    const size_t m = std::min(chunk, n - off);
    const uint64_t t = ch.next_ticket();
    ch.acquire(t, s.ctx);
    timed(st, [&] { publish_copy(st.stores, ch.slot(r, t), at(in, off), m * es); });
    ch.publish(Counter::kStaged, t + 1);
    if (receives) {
      char* own = at(out, static_cast<size_t>(r) * n + off);
      if (own != at(in, off)) timed(st, [&] { copy_bytes(own, at(in, off), m * es); });
      for (int p = 0; p < ch.world(); ++p) {
        if (p == r) continue;
        ch.wait_for(p, Counter::kStaged, t + 1, s.ctx);
        timed(st, [&] { copy_bytes(at(out, static_cast<size_t>(p) * n + off), ch.slot(p, t), m * es); });
      }
    }
    ch.publish(Counter::kDone, t + 1);
  }
  return true;
}

bool scatter_step(ShmChannel& ch, ShmStep& s) {
  const Buffer &in = s.in, &out = s.out;
  const size_t es = dtype_size(out.dtype);
  const size_t piece = ch.geometry().slot_bytes / static_cast<size_t>(ch.world()) / es;
  const size_t n = out.count;
  const int r = ch.rank(), root = s.ctx.desc.root;
  for (size_t off = 0; off < n; off += piece) {
    const size_t m = std::min(piece, n - off);
    const uint64_t t = ch.next_ticket();
    if (r == root) {
      ch.acquire(t, s.ctx);
      for (int p = 0; p < ch.world(); ++p) {
        if (p != r)
          copy_bytes(ch.slot(r, t) + p * piece * es, at(in, static_cast<size_t>(p) * n + off), m * es);
      }
      ch.publish(Counter::kStaged, t + 1);
      char* own = at(in, static_cast<size_t>(r) * n + off);
      if (own != at(out, off)) copy_bytes(at(out, off), own, m * es);
    } else {
      ch.wait_for(root, Counter::kStaged, t + 1, s.ctx);
      copy_bytes(at(out, off), ch.slot(root, t) + r * piece * es, m * es);
    }
    ch.publish(Counter::kDone, t + 1);
  }
  return true;
}

bool all_to_all_step(ShmChannel& ch, ShmStep& s) {
  const Buffer &in = s.in, &out = s.out;
  const size_t es = dtype_size(out.dtype);
  const size_t n = in.count / static_cast<size_t>(ch.world());
  const int r = ch.rank();
  exchange_pieces(ch, s, n, [&](const PieceChunk& c) {
    const size_t own = static_cast<size_t>(r) * n + c.off;
    if (at(out, own) != at(in, own)) timed(s.at, [&] { copy_bytes(at(out, own), at(in, own), c.m * es); });
    for (int p = 0; p < ch.world(); ++p) {
      if (p == r) continue;
      ch.wait_for(p, Counter::kStaged, c.t + 1, s.ctx);
      timed(s.at, [&] {
        copy_bytes(at(out, static_cast<size_t>(p) * n + c.off), ch.slot(p, c.t) + r * c.piece * es, c.m * es);
      });
    }
  });
  return true;
}

}  // namespace ddp::comm::tcp
