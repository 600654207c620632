// The collectives but all_reduce written once over a ByteTransport (byte_collectives.h).
#include "comm/tcp/byte_collectives.h"

#include <algorithm>
#include <cstring>
#include <vector>

#include "comm/reduce_kernels.h"
#include "comm/tcp/share.h"
#include "common/error.h"

namespace ddp::comm::tcp {
namespace {

// Receives of `count` elements from every peer into its scratch, in chunks: a batch per peer,
// message k its k-th chunk.
std::vector<ByteTransport::Batch> post_arrivals(ByteTransport& t, ByteScratch& scratch, const OpContext& ctx,
                                                size_t count, size_t es, size_t chunk) {
  const int w = t.world();
  scratch.per_peer.resize(static_cast<size_t>(w));
  std::vector<ByteTransport::Batch> arrivals(static_cast<size_t>(w));
  for (int p = 0; p < w; ++p) {
    if (p == t.rank()) continue;
    auto& slot = scratch.per_peer[static_cast<size_t>(p)];
    if (slot.size() < count * es) slot.resize(count * es);
    for (size_t off = 0; off < count; off += chunk)
      t.recv(arrivals[static_cast<size_t>(p)], p, 0, slot.data() + off * es,
             std::min(chunk, count - off) * es, ctx);
  }
  return arrivals;
}

void direct_broadcast(ByteTransport& t, const OpContext& ctx, const Buffer& buf) {
  ByteTransport::Batch b;
  const int root = ctx.desc.root;
  if (t.rank() == root) {
    for (int p = 0; p < t.world(); ++p) {
      if (p != root) t.send(b, p, 0, buf.data, buf.bytes(), ctx);
    }
  } else {
    t.recv(b, root, 0, buf.data, buf.bytes(), ctx);
  }
  t.wait(b, ctx);
}

// The root posts a receive of every chunk from every peer into the scratch, then reduces each
// chunk as its peers' copies land (in rank order), while later chunks are still on the way.
void direct_reduce(ByteTransport& t, ByteScratch& scratch, const OpContext& ctx, const Buffer& buf) {
  const int root = ctx.desc.root, w = t.world();
  const size_t es = dtype_size(buf.dtype), chunk = std::max<size_t>(1, t.chunk_bytes() / es);
  ByteTransport::Batch b;
  if (t.rank() != root) {
    for (size_t off = 0; off < buf.count; off += chunk)
      t.send(b, root, 0, at(buf, off), std::min(chunk, buf.count - off) * es, ctx);
    t.wait(b, ctx);
    return;
  }
  std::vector<ByteTransport::Batch> arrivals = post_arrivals(t, scratch, ctx, buf.count, es, chunk);
  for (size_t k = 0, off = 0; off < buf.count; ++k, off += chunk) {
    for (int p = 0; p < w; ++p) {
      if (p == root) continue;
      t.wait_one(arrivals[static_cast<size_t>(p)], k, ctx);
      combine(at(buf, off), scratch.per_peer[static_cast<size_t>(p)].data() + off * es,
              std::min(chunk, buf.count - off), buf.dtype, ctx.desc.rop);
    }
  }
  for (auto& a : arrivals) t.wait(a, ctx);
  if (ctx.desc.rop == ReduceOp::kAvg) finish_avg(buf.data, buf.count, buf.dtype, w);
}

void direct_all_gather(ByteTransport& t, const OpContext& ctx, const Buffer& in, const Buffer& out,
                       bool all) {
  ByteTransport::Batch b;
  const int r = t.rank(), root = ctx.desc.root;
  const size_t n = in.count;
  const bool receives = all || r == root;
  for (int p = 0; p < t.world(); ++p) {
    if (p == r) continue;
    if (all || p == root) t.send(b, p, 0, in.data, in.bytes(), ctx);
    if (receives) t.recv(b, p, 0, at(out, static_cast<size_t>(p) * n), in.bytes(), ctx);
  }
  if (receives && at(out, static_cast<size_t>(r) * n) != in.data) {
    std::memcpy(at(out, static_cast<size_t>(r) * n), in.data, in.bytes());
  }
  t.wait(b, ctx);
}

void direct_scatter(ByteTransport& t, const OpContext& ctx, const Buffer& in, const Buffer& out) {
  ByteTransport::Batch b;
  const int r = t.rank(), root = ctx.desc.root;
  const size_t n = out.count;
  if (r == root) {
    for (int p = 0; p < t.world(); ++p) {
      if (p != r) t.send(b, p, 0, at(in, static_cast<size_t>(p) * n), out.bytes(), ctx);
    }
    if (at(in, static_cast<size_t>(r) * n) != out.data)
      std::memcpy(out.data, at(in, static_cast<size_t>(r) * n), out.bytes());
  } else {
    t.recv(b, root, 0, out.data, out.bytes(), ctx);
  }
  t.wait(b, ctx);
}

// Each rank sends every peer its block in chunks, receives theirs of its own block into the
// scratch, and reduces each chunk as every peer's copy lands (own value first, then the peers in
// rank order).
void direct_reduce_scatter(ByteTransport& t, ByteScratch& scratch, const OpContext& ctx, const Buffer& in,
                           const Buffer& out) {
  const int r = t.rank(), w = t.world();
  const size_t n = out.count, es = dtype_size(out.dtype), chunk = std::max<size_t>(1, t.chunk_bytes() / es);
  std::vector<ByteTransport::Batch> arrivals = post_arrivals(t, scratch, ctx, n, es, chunk);
  ByteTransport::Batch sends;
  for (int p = 0; p < w; ++p) {
    if (p == r) continue;
    for (size_t off = 0; off < n; off += chunk)
      t.send(sends, p, 0, at(in, static_cast<size_t>(p) * n + off), std::min(chunk, n - off) * es, ctx);
  }
  for (size_t k = 0, off = 0; off < n; ++k, off += chunk) {
    const size_t len = std::min(chunk, n - off);
    bool first = true;
    for (int p = 0; p < w; ++p) {
      if (p == r) continue;
      t.wait_one(arrivals[static_cast<size_t>(p)], k, ctx);
      const char* theirs = scratch.per_peer[static_cast<size_t>(p)].data() + off * es;
      if (first) {
        combine3(at(out, off), at(in, static_cast<size_t>(r) * n + off), theirs, len, out.dtype,
                 ctx.desc.rop);
      } else {
        combine(at(out, off), theirs, len, out.dtype, ctx.desc.rop);
      }
      first = false;
    }
    if (ctx.desc.rop == ReduceOp::kAvg) finish_avg(at(out, off), len, out.dtype, w);
  }
  for (auto& a : arrivals) t.wait(a, ctx);
  t.wait(sends, ctx);
}

void direct_all_to_all(ByteTransport& t, const OpContext& ctx, const Buffer& in, const Buffer& out) {
  ByteTransport::Batch b;
  const int r = t.rank(), w = t.world();
  const size_t n = in.count / static_cast<size_t>(w), piece = n * dtype_size(in.dtype);
  std::vector<char> copy;
  const char* src = static_cast<const char*>(in.data);
  if (in.data == out.data) {  // in place: send from a copy, receive into the buffer
    copy.assign(src, src + in.bytes());
    src = copy.data();
  }
  for (int p = 0; p < w; ++p) {
    if (p == r) continue;
    t.send(b, p, 0, src + static_cast<size_t>(p) * piece, piece, ctx);
    t.recv(b, p, 0, at(out, static_cast<size_t>(p) * n), piece, ctx);
  }
  if (in.data != out.data)
    std::memcpy(at(out, static_cast<size_t>(r) * n), src + static_cast<size_t>(r) * piece, piece);
  t.wait(b, ctx);
}

}  // namespace

void run_direct(ByteTransport& t, ByteScratch& scratch, const OpContext& ctx, const Buffer& in,
                const Buffer& out) {
  switch (ctx.desc.kind) {
    case OpKind::kBroadcast: return direct_broadcast(t, ctx, in);
    case OpKind::kReduce: return direct_reduce(t, scratch, ctx, in);
    case OpKind::kAllGather: return direct_all_gather(t, ctx, in, out, true);
    case OpKind::kGather: return direct_all_gather(t, ctx, in, out, false);
    case OpKind::kScatter: return direct_scatter(t, ctx, in, out);
    case OpKind::kReduceScatter: return direct_reduce_scatter(t, scratch, ctx, in, out);
    case OpKind::kAllToAll: return direct_all_to_all(t, ctx, in, out);
    case OpKind::kAllReduce:
    case OpKind::kBarrier: break;
  }
  DDP_CHECK(false, "run_direct: ", to_string(ctx.desc.kind), " is not one of its ops");
}

}  // namespace ddp::comm::tcp
