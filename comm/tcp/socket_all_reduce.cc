// SocketCollectives' all_reduce algorithms (socket_collectives.h) and the rule that picks one.
#include <algorithm>
#include <bit>
#include <cstring>

#include "comm/reduce_kernels.h"
#include "comm/tcp/share.h"
#include "comm/tcp/socket_collectives.h"
#include "common/error.h"
#include "common/settings.h"

namespace ddp::comm::tcp {
namespace {

int mod(int a, int w) { return ((a % w) + w) % w; }

}  // namespace

void SocketCollectives::all_reduce(const OpContext& ctx, const Buffer& buf, Algorithm algorithm) {
  switch (algorithm) {
    case Algorithm::kSocketOneshot: return oneshot_all_reduce(ctx, buf);
    case Algorithm::kSocketRing: return ring_all_reduce(ctx, buf);
    case Algorithm::kSocketHalvingDoubling: return hd_all_reduce(ctx, buf);
    default: return pipelined_all_reduce(ctx, buf);
  }
}

// Small: everyone's whole buffer to everyone, combined in rank order everywhere. The op's
// fingerprints go first and the data right behind them, without waiting for them: the data
// travels in a block that its messages own (kept alive until each finishes), so that a
// mismatch, found before anything is reduced, returns while they may still be in flight and
// leaves the engine nothing of the caller's to touch.
void SocketCollectives::oneshot_all_reduce(const OpContext& ctx, const Buffer& buf) {
  OneShot o;
  post_oneshot(ctx, buf, o);
  end_oneshot(ctx, buf, o);
}

void SocketCollectives::post_oneshot(const OpContext& ctx, const Buffer& buf, OneShot& o) {
  const int r = opt_.rank, w = opt_.world;
  const size_t bytes = buf.bytes();
  o.block = std::make_shared<std::vector<char>>(static_cast<size_t>(w) * bytes);
  auto slot = [&](int p) { return o.block->data() + static_cast<size_t>(p) * bytes; };
  std::memcpy(slot(r), buf.data, bytes);
  {
    SocketEngine::Hold together(first());
    if (opt_.fingerprints) post_fingerprints(ctx, o.f);
    for (int p = 0; p < w; ++p) {
      if (p == r) continue;
      send(o.b, p, 0, slot(r), bytes, ctx);
      recv(o.b, p, 0, slot(p), bytes, ctx);
    }
  }
  for (auto& entry : o.b.works) entry.first->then([block = o.block](Work&) {});
}

void SocketCollectives::end_oneshot(const OpContext& ctx, const Buffer& buf, OneShot& o) {
  const int w = opt_.world;
  const size_t n = buf.count, bytes = buf.bytes();
  const ReduceOp rop = ctx.desc.rop;
  auto slot = [&](int p) { return o.block->data() + static_cast<size_t>(p) * bytes; };
  if (opt_.fingerprints) check_fingerprints(ctx, o.f);
  wait(o.b, ctx);
  combine3(buf.data, slot(0), slot(1), n, buf.dtype, rop);
  for (int p = 2; p < w; ++p) combine(buf.data, slot(p), n, buf.dtype, rop);
  if (rop == ReduceOp::kAvg) finish_avg(buf.data, n, buf.dtype, w);
}

// Direct: reduce-scatter then all-gather with every peer at once, each rank's part cut into
// chunks of Options::chunk_bytes (the same on every rank: chunk boundaries are part of the
// protocol) so the phases overlap the transfers: every message of the op is posted first (each
// peer's contributions land in this group's scratch, never in the engine's unexpected queue),
// then each chunk of this rank's part is reduced as soon as every peer's copy of it arrived (own
// value first, then the peers in rank order: the same bits on every run) and sent on to every
// peer at once, while later chunks are still on the wire. The all-gather lands straight in the
// caller's buffer.
void SocketCollectives::pipelined_all_reduce(const OpContext& ctx, const Buffer& buf) {
  const int r = opt_.rank, w = opt_.world;
  const size_t es = dtype_size(buf.dtype), n = buf.count;
  const size_t chunk = std::max<size_t>(1, opt_.chunk_bytes / es);
  const Part me = part(n, w, r);
  scratch_.resize(static_cast<size_t>(w));
  Batch rest;  // sends, and the all-gather's recvs: waited for at the end
  std::vector<Batch> arrivals(static_cast<size_t>(w));  // per peer: one recv per chunk of my part
  for (int p = 0; p < w; ++p) {
    if (p == r) continue;
    auto& slot = scratch_[static_cast<size_t>(p)];
    if (slot.size() < me.len * es) slot.resize(me.len * es);
    const Part theirs = part(n, w, p);
    for (size_t off = 0; off < theirs.len; off += chunk) {
      const size_t len = std::min(chunk, theirs.len - off);
      send(rest, p, 0, at(buf, theirs.off + off), len * es, ctx);
      recv(rest, p, 1, at(buf, theirs.off + off), len * es, ctx);
    }
    for (size_t off = 0; off < me.len; off += chunk) {
      recv(arrivals[static_cast<size_t>(p)], p, 0, slot.data() + off * es, std::min(chunk, me.len - off) * es,
           ctx);
    }
  }
  for (size_t k = 0, off = 0; off < me.len; ++k, off += chunk) {
    const size_t len = std::min(chunk, me.len - off);
    for (int p = 0; p < w; ++p) {
      if (p == r) continue;
      wait_one(arrivals[static_cast<size_t>(p)], k, ctx);
      combine(at(buf, me.off + off), scratch_[static_cast<size_t>(p)].data() + off * es, len, buf.dtype,
              ctx.desc.rop);
    }
    if (ctx.desc.rop == ReduceOp::kAvg) finish_avg(at(buf, me.off + off), len, buf.dtype, w);
    for (int p = 0; p < w; ++p) {
      if (p != r) send(rest, p, 1, at(buf, me.off + off), len * es, ctx);
    }
  }
  for (auto& a : arrivals) wait(a, ctx);
  wait(rest, ctx);
}

// Ring: w - 1 reduce-scatter steps (step s: block r - s goes right, block r - s - 1 comes from
// the left and is reduced), then w - 1 all-gather steps (block r + 1 - s goes right, block r - s
// arrives straight into the buffer). Every receive is posted first, in order (the left
// neighbour sends in the same order: one tag per phase, matched first come first served), and
// each chunk moves on as soon as it is ready, so step s + 1 of a chunk overlaps step s of the
// next. Block b's value is reduced along the ring from rank b to rank b - 1, which owns it.
void SocketCollectives::ring_all_reduce(const OpContext& ctx, const Buffer& buf) {
  const int r = opt_.rank, w = opt_.world, right = mod(r + 1, w), left = mod(r - 1, w);
  const size_t es = dtype_size(buf.dtype), n = buf.count;
  const size_t chunk = std::max<size_t>(1, opt_.chunk_bytes / es);
  const size_t block_max = part(n, w, 0).len;
  if (ring_scratch_.size() < static_cast<size_t>(w - 1) * block_max * es) {
    ring_scratch_.resize(static_cast<size_t>(w - 1) * block_max * es);
  }
  auto chunks = [&](const Part& b, auto fn) {
    for (size_t k = 0, off = 0; off < b.len; ++k, off += chunk) fn(k, off, std::min(chunk, b.len - off));
  };
  Batch sends;
  // Per step: its chunks' receives, for the reduce-scatter and the all-gather.
  std::vector<Batch> incoming(static_cast<size_t>(w - 1)), gathered(static_cast<size_t>(w - 1));
  for (int s = 0; s < w - 1; ++s) {
    char* slot = ring_scratch_.data() + static_cast<size_t>(s) * block_max * es;
    chunks(part(n, w, mod(r - s - 1, w)), [&](size_t, size_t off, size_t len) {
      recv(incoming[static_cast<size_t>(s)], left, 0, slot + off * es, len * es, ctx);
    });
  }
  for (int s = 0; s < w - 1; ++s) {
    const Part b = part(n, w, mod(r - s, w));
    chunks(b, [&](size_t, size_t off, size_t len) {
      recv(gathered[static_cast<size_t>(s)], left, 1, at(buf, b.off + off), len * es, ctx);
    });
  }
  const Part first = part(n, w, r);
  chunks(first, [&](size_t, size_t off, size_t len) {
    send(sends, right, 0, at(buf, first.off + off), len * es, ctx);
  });
  for (int s = 0; s < w - 1; ++s) {
    const Part b = part(n, w, mod(r - s - 1, w));
    const char* slot = ring_scratch_.data() + static_cast<size_t>(s) * block_max * es;
    const bool last = s == w - 2;
    chunks(b, [&](size_t k, size_t off, size_t len) {
      wait_one(incoming[static_cast<size_t>(s)], k, ctx);
      combine(at(buf, b.off + off), slot + off * es, len, buf.dtype, ctx.desc.rop);
      if (last && ctx.desc.rop == ReduceOp::kAvg) finish_avg(at(buf, b.off + off), len, buf.dtype, w);
      send(sends, right, last ? 1 : 0, at(buf, b.off + off), len * es, ctx);
    });
  }
  // All-gather: block r - s (s >= 1) arrives and goes on right, but the last one.
  for (int s = 0; s < w - 2; ++s) {
    const Part b = part(n, w, mod(r - s, w));
    chunks(b, [&](size_t k, size_t off, size_t len) {
      wait_one(gathered[static_cast<size_t>(s)], k, ctx);
      send(sends, right, 1, at(buf, b.off + off), len * es, ctx);
    });
  }
  for (auto& batch : incoming) wait(batch, ctx);
  for (auto& batch : gathered) wait(batch, ctx);
  wait(sends, ctx);
}

// Chunked: both directions posted at once; incoming chunks reduced in order as they land.
void SocketCollectives::exchange(const OpContext& ctx, const Buffer& buf, const Exchange& x) {
  const size_t es = dtype_size(buf.dtype), chunk = std::max<size_t>(1, opt_.chunk_bytes / es);
  if (x.reduce && ring_scratch_.size() < x.recv_len * es) ring_scratch_.resize(x.recv_len * es);
  Batch sends, arrivals;
  for (size_t off = 0; off < x.recv_len; off += chunk) {
    const size_t len = std::min(chunk, x.recv_len - off);
    recv(arrivals, x.peer, x.step, x.reduce ? ring_scratch_.data() + off * es : at(buf, x.recv_off + off),
         len * es, ctx);
  }
  for (size_t off = 0; off < x.send_len; off += chunk) {
    send(sends, x.peer, x.step, at(buf, x.send_off + off), std::min(chunk, x.send_len - off) * es, ctx);
  }
  if (x.reduce) {
    for (size_t k = 0, off = 0; off < x.recv_len; ++k, off += chunk) {
      wait_one(arrivals, k, ctx);
      combine(at(buf, x.recv_off + off), ring_scratch_.data() + off * es, std::min(chunk, x.recv_len - off),
              buf.dtype, ctx.desc.rop);
    }
  }
  wait(arrivals, ctx);
  wait(sends, ctx);
}

// Recursive halving/doubling (Rabenseifner) over p2 = the largest power of two <= world ranks.
// The first 2 * extra ranks pair up: the even one hands its buffer to the odd one (which takes
// part as virtual rank r / 2) and gets the result back at the end; the others are virtual rank
// r - extra. Then halving_plan's steps, and back.
void SocketCollectives::hd_all_reduce(const OpContext& ctx, const Buffer& buf) {
  const int r = opt_.rank, w = opt_.world;
  const int p2 = static_cast<int>(std::bit_floor(static_cast<unsigned>(w))), extra = w - p2;
  const size_t n = buf.count;
  const bool folded = r < 2 * extra && r % 2 == 0;
  if (r < 2 * extra) {
    Exchange x{.peer = folded ? r + 1 : r - 1, .step = 0};
    (folded ? x.send_len : x.recv_len) = n;
    x.reduce = !folded;
    exchange(ctx, buf, x);
  }
  if (!folded) halving_doubling(ctx, buf, r < 2 * extra ? r / 2 : r - extra, p2, extra);
  if (r < 2 * extra) {
    Exchange x{.peer = folded ? r + 1 : r - 1, .step = 3};
    (folded ? x.recv_len : x.send_len) = n;
    exchange(ctx, buf, x);
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

void SocketCollectives::halving_doubling(const OpContext& ctx, const Buffer& buf, int vrank, int p2,
                                         int extra) {
  auto real = [&](int v) { return v < extra ? 2 * v + 1 : v + extra; };
  const std::vector<HalvingStep> plan = halving_plan(buf.count, vrank, p2);
  for (const HalvingStep& s : plan)
    exchange(ctx, buf, {real(s.partner), 1, s.give_off, s.give_len, s.keep_off, s.keep_len, true});
  if (ctx.desc.rop == ReduceOp::kAvg) {  // the range this rank holds whole
    const HalvingStep last = plan.empty() ? HalvingStep{.keep_len = buf.count} : plan.back();
    finish_avg(at(buf, last.keep_off), last.keep_len, buf.dtype, opt_.world);
  }
  for (auto s = plan.rbegin(); s != plan.rend(); ++s)
    exchange(ctx, buf, {real(s->partner), 2, s->keep_off, s->keep_len, s->give_off, s->give_len, false});
}

}  // namespace ddp::comm::tcp
