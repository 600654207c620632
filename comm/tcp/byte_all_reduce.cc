// The collective algorithms written once over a ByteTransport (byte_all_reduce.h).
#include "comm/tcp/byte_all_reduce.h"

#include <algorithm>
#include <bit>

#include "comm/reduce_kernels.h"
#include "comm/tcp/share.h"

namespace ddp::comm::tcp {
namespace {

int mod(int a, int w) { return ((a % w) + w) % w; }

// One step of hd with one peer: send [send_off, +send_len) of the buffer, receive
// [recv_off, +recv_len) (reduced into the buffer as each chunk arrives, or straight into it).
struct Exchange {
  int peer = 0;
  int step = 0;
  size_t send_off = 0, send_len = 0, recv_off = 0, recv_len = 0;
  bool reduce = false;
};

// Chunked: both directions posted at once; incoming chunks reduced in order as they land.
void exchange(ByteTransport& t, std::vector<char>& incoming, const OpContext& ctx, const Buffer& buf,
              const Exchange& x) {
  const size_t es = dtype_size(buf.dtype), chunk = std::max<size_t>(1, t.chunk_bytes() / es);
  if (x.reduce && incoming.size() < x.recv_len * es) incoming.resize(x.recv_len * es);
  ByteTransport::Batch sends, arrivals;
  for (size_t off = 0; off < x.recv_len; off += chunk) {
    const size_t len = std::min(chunk, x.recv_len - off);
    t.recv(arrivals, x.peer, x.step, x.reduce ? incoming.data() + off * es : at(buf, x.recv_off + off),
           len * es, ctx);
  }
  for (size_t off = 0; off < x.send_len; off += chunk) {
    t.send(sends, x.peer, x.step, at(buf, x.send_off + off), std::min(chunk, x.send_len - off) * es, ctx);
  }
  if (x.reduce) {
    for (size_t k = 0, off = 0; off < x.recv_len; ++k, off += chunk) {
      t.wait_one(arrivals, k, ctx);
      combine(at(buf, x.recv_off + off), incoming.data() + off * es, std::min(chunk, x.recv_len - off),
              buf.dtype, ctx.desc.rop);
    }
  }
  t.wait(arrivals, ctx);
  t.wait(sends, ctx);
}

void halving_doubling(ByteTransport& t, std::vector<char>& incoming, const OpContext& ctx, const Buffer& buf,
                      int vrank, int p2, int extra) {
  auto real = [&](int v) { return v < extra ? 2 * v + 1 : v + extra; };
  const std::vector<HalvingStep> plan = halving_plan(buf.count, vrank, p2);
  for (const HalvingStep& s : plan)
    exchange(t, incoming, ctx, buf,
             {real(s.partner), 1, s.give_off, s.give_len, s.keep_off, s.keep_len, true});
  if (ctx.desc.rop == ReduceOp::kAvg) {  // the range this rank holds whole
    const HalvingStep last = plan.empty() ? HalvingStep{.keep_len = buf.count} : plan.back();
    finish_avg(at(buf, last.keep_off), last.keep_len, buf.dtype, t.world());
  }
  for (auto s = plan.rbegin(); s != plan.rend(); ++s)
    exchange(t, incoming, ctx, buf,
             {real(s->partner), 2, s->keep_off, s->keep_len, s->give_off, s->give_len, false});
}

}  // namespace

// Direct: reduce-scatter then all-gather with every peer at once, each rank's part cut into
// chunks of Options::chunk_bytes (the same on every rank: chunk boundaries are part of the
// protocol) so the phases overlap the transfers: every message of the op is posted first (each
// peer's contributions land in this group's scratch, never in the engine's unexpected queue),
// then each chunk of this rank's part is reduced as soon as every peer's copy of it arrived (own
// value first, then the peers in rank order: the same bits on every run) and sent on to every
// peer at once, while later chunks are still on the wire. The all-gather lands straight in the
// caller's buffer.
void direct_all_reduce(ByteTransport& t, ByteScratch& scratch, const OpContext& ctx, const Buffer& buf) {
  const int r = t.rank(), w = t.world();
  const size_t es = dtype_size(buf.dtype), n = buf.count;
  const size_t chunk = std::max<size_t>(1, t.chunk_bytes() / es);
  const Part me = part(n, w, r);
  scratch.per_peer.resize(static_cast<size_t>(w));
  ByteTransport::Batch rest;  // sends, and the all-gather's recvs: waited for at the end
  std::vector<ByteTransport::Batch> arrivals(
      static_cast<size_t>(w));  // per peer: one recv per chunk of my part
  for (int p = 0; p < w; ++p) {
    if (p == r) continue;
    auto& slot = scratch.per_peer[static_cast<size_t>(p)];
    if (slot.size() < me.len * es) slot.resize(me.len * es);
    const Part theirs = part(n, w, p);
    for (size_t off = 0; off < theirs.len; off += chunk) {
      const size_t len = std::min(chunk, theirs.len - off);
      t.send(rest, p, 0, at(buf, theirs.off + off), len * es, ctx);
      t.recv(rest, p, 1, at(buf, theirs.off + off), len * es, ctx);
    }
    for (size_t off = 0; off < me.len; off += chunk) {
      t.recv(arrivals[static_cast<size_t>(p)], p, 0, slot.data() + off * es,
             std::min(chunk, me.len - off) * es, ctx);
    }
  }
  for (size_t k = 0, off = 0; off < me.len; ++k, off += chunk) {
    const size_t len = std::min(chunk, me.len - off);
    for (int p = 0; p < w; ++p) {
      if (p == r) continue;
      t.wait_one(arrivals[static_cast<size_t>(p)], k, ctx);
      combine(at(buf, me.off + off), scratch.per_peer[static_cast<size_t>(p)].data() + off * es, len,
              buf.dtype, ctx.desc.rop);
    }
    if (ctx.desc.rop == ReduceOp::kAvg) finish_avg(at(buf, me.off + off), len, buf.dtype, w);
    for (int p = 0; p < w; ++p) {
      if (p != r) t.send(rest, p, 1, at(buf, me.off + off), len * es, ctx);
    }
  }
  for (auto& a : arrivals) t.wait(a, ctx);
  t.wait(rest, ctx);
}

// Ring: w - 1 reduce-scatter steps (step s: block r - s goes right, block r - s - 1 comes from
// the left and is reduced), then w - 1 all-gather steps (block r + 1 - s goes right, block r - s
// arrives straight into the buffer). Every receive is posted first, in order (the left
// neighbour sends in the same order: one tag per phase, matched first come first served), and
// each chunk moves on as soon as it is ready, so step s + 1 of a chunk overlaps step s of the
// next. Block b's value is reduced along the ring from rank b to rank b - 1, which owns it.
void ring_all_reduce(ByteTransport& t, ByteScratch& scratch, const OpContext& ctx, const Buffer& buf) {
  const int r = t.rank(), w = t.world(), right = mod(r + 1, w), left = mod(r - 1, w);
  const size_t es = dtype_size(buf.dtype), n = buf.count;
  const size_t chunk = std::max<size_t>(1, t.chunk_bytes() / es);
  const size_t block_max = part(n, w, 0).len;
  if (scratch.incoming.size() < static_cast<size_t>(w - 1) * block_max * es) {
    scratch.incoming.resize(static_cast<size_t>(w - 1) * block_max * es);
  }
  auto chunks = [&](const Part& b, auto fn) {
    for (size_t k = 0, off = 0; off < b.len; ++k, off += chunk) fn(k, off, std::min(chunk, b.len - off));
  };
  ByteTransport::Batch sends;
  // Per step: its chunks' receives, for the reduce-scatter and the all-gather.
  std::vector<ByteTransport::Batch> incoming(static_cast<size_t>(w - 1)),
      gathered(static_cast<size_t>(w - 1));
  for (int s = 0; s < w - 1; ++s) {
    char* slot = scratch.incoming.data() + static_cast<size_t>(s) * block_max * es;
    chunks(part(n, w, mod(r - s - 1, w)), [&](size_t, size_t off, size_t len) {
      t.recv(incoming[static_cast<size_t>(s)], left, 0, slot + off * es, len * es, ctx);
    });
  }
  for (int s = 0; s < w - 1; ++s) {
    const Part b = part(n, w, mod(r - s, w));
    chunks(b, [&](size_t, size_t off, size_t len) {
      t.recv(gathered[static_cast<size_t>(s)], left, 1, at(buf, b.off + off), len * es, ctx);
    });
  }
  const Part first = part(n, w, r);
  chunks(first, [&](size_t, size_t off, size_t len) {
    t.send(sends, right, 0, at(buf, first.off + off), len * es, ctx);
  });
  for (int s = 0; s < w - 1; ++s) {
    const Part b = part(n, w, mod(r - s - 1, w));
    const char* slot = scratch.incoming.data() + static_cast<size_t>(s) * block_max * es;
    const bool last = s == w - 2;
    chunks(b, [&](size_t k, size_t off, size_t len) {
      t.wait_one(incoming[static_cast<size_t>(s)], k, ctx);
      combine(at(buf, b.off + off), slot + off * es, len, buf.dtype, ctx.desc.rop);
      if (last && ctx.desc.rop == ReduceOp::kAvg) finish_avg(at(buf, b.off + off), len, buf.dtype, w);
      t.send(sends, right, last ? 1 : 0, at(buf, b.off + off), len * es, ctx);
    });
  }
  // All-gather: block r - s (s >= 1) arrives and goes on right, but the last one.
  for (int s = 0; s < w - 2; ++s) {
    const Part b = part(n, w, mod(r - s, w));
    chunks(b, [&](size_t k, size_t off, size_t len) {
      t.wait_one(gathered[static_cast<size_t>(s)], k, ctx);
      t.send(sends, right, 1, at(buf, b.off + off), len * es, ctx);
    });
  }
  for (auto& batch : incoming) t.wait(batch, ctx);
  for (auto& batch : gathered) t.wait(batch, ctx);
  t.wait(sends, ctx);
}

// Recursive halving/doubling (Rabenseifner) over p2 = the largest power of two <= world ranks.
// The first 2 * extra ranks pair up: the even one hands its buffer to the odd one (which takes
// part as virtual rank r / 2) and gets the result back at the end; the others are virtual rank
// r - extra. Then halving_plan's steps, and back.
void hd_all_reduce(ByteTransport& t, ByteScratch& scratch, const OpContext& ctx, const Buffer& buf) {
  const int r = t.rank(), w = t.world();
  const int p2 = static_cast<int>(std::bit_floor(static_cast<unsigned>(w))), extra = w - p2;
  const size_t n = buf.count;
  const bool folded = r < 2 * extra && r % 2 == 0;
  if (r < 2 * extra) {
    Exchange x{.peer = folded ? r + 1 : r - 1, .step = 0};
    (folded ? x.send_len : x.recv_len) = n;
    x.reduce = !folded;
    exchange(t, scratch.incoming, ctx, buf, x);
  }
  if (!folded) halving_doubling(t, scratch.incoming, ctx, buf, r < 2 * extra ? r / 2 : r - extra, p2, extra);
  if (r < 2 * extra) {
    Exchange x{.peer = folded ? r + 1 : r - 1, .step = 3};
    (folded ? x.recv_len : x.send_len) = n;
    exchange(t, scratch.incoming, ctx, buf, x);
  }
}

std::vector<HalvingStep> halving_plan(size_t count, int vrank, int p2) {
  std::vector<HalvingStep> plan;
  size_t off = 0, len = count;
  for (int mask = 1; mask < p2; mask *= 2) {
    const size_t half = len / 2;
    const bool low = (vrank & mask) == 0;  // keeps the lower half; its partner the upper
    HalvingStep s{.partner = vrank ^ mask};
    s.keep_off = low ? off : off + half;
    s.keep_len = low ? half : len - half;
    s.give_off = low ? off + half : off;
    s.give_len = len - s.keep_len;
    plan.push_back(s);
    off = s.keep_off;
    len = s.keep_len;
  }
  return plan;
}

}  // namespace ddp::comm::tcp
