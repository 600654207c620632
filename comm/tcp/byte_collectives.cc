// The collectives but all_reduce written once over a ByteTransport (byte_collectives.h).
#include "comm/tcp/byte_collectives.h"

#include <cstring>
#include <vector>

#include "comm/reduce_kernels.h"
#include "comm/tcp/share.h"
#include "common/error.h"

namespace ddp::comm::tcp {
namespace {

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

void direct_reduce(ByteTransport& t, const OpContext& ctx, const Buffer& buf) {
  ByteTransport::Batch b;
  const int root = ctx.desc.root, w = t.world();
  if (t.rank() != root) {
    t.send(b, root, 0, buf.data, buf.bytes(), ctx);
    t.wait(b, ctx);
    return;
  }
  std::vector<std::vector<char>> c(static_cast<size_t>(w));
  for (int p = 0; p < w; ++p) {
    if (p == root) continue;
    c[static_cast<size_t>(p)].resize(buf.bytes());
    t.recv(b, p, 0, c[static_cast<size_t>(p)].data(), buf.bytes(), ctx);
  }
  t.wait(b, ctx);
  for (int p = 0; p < w; ++p) {
    if (p != root) combine(buf.data, c[static_cast<size_t>(p)].data(), buf.count, buf.dtype, ctx.desc.rop);
  }
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

void direct_reduce_scatter(ByteTransport& t, const OpContext& ctx, const Buffer& in, const Buffer& out) {
  ByteTransport::Batch b;
  const int r = t.rank(), w = t.world();
  const size_t n = out.count;
  std::vector<std::vector<char>> c(static_cast<size_t>(w));
  for (int p = 0; p < w; ++p) {
    if (p == r) continue;
    t.send(b, p, 0, at(in, static_cast<size_t>(p) * n), out.bytes(), ctx);
    c[static_cast<size_t>(p)].resize(out.bytes());
    t.recv(b, p, 0, c[static_cast<size_t>(p)].data(), out.bytes(), ctx);
  }
  t.wait(b, ctx);
  bool first = true;
  for (int p = 0; p < w; ++p) {
    if (p == r) continue;
    if (first) {
      combine3(out.data, at(in, static_cast<size_t>(r) * n), c[static_cast<size_t>(p)].data(), n, out.dtype,
               ctx.desc.rop);
    } else {
      combine(out.data, c[static_cast<size_t>(p)].data(), n, out.dtype, ctx.desc.rop);
    }
    first = false;
  }
  if (ctx.desc.rop == ReduceOp::kAvg) finish_avg(out.data, n, out.dtype, w);
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

void run_direct(ByteTransport& t, const OpContext& ctx, const Buffer& in, const Buffer& out) {
  switch (ctx.desc.kind) {
    case OpKind::kBroadcast: return direct_broadcast(t, ctx, in);
    case OpKind::kReduce: return direct_reduce(t, ctx, in);
    case OpKind::kAllGather: return direct_all_gather(t, ctx, in, out, true);
    case OpKind::kGather: return direct_all_gather(t, ctx, in, out, false);
    case OpKind::kScatter: return direct_scatter(t, ctx, in, out);
    case OpKind::kReduceScatter: return direct_reduce_scatter(t, ctx, in, out);
    case OpKind::kAllToAll: return direct_all_to_all(t, ctx, in, out);
    case OpKind::kAllReduce:
    case OpKind::kBarrier: break;
  }
  DDP_CHECK(false, "run_direct: ", to_string(ctx.desc.kind), " is not one of its ops");
}

}  // namespace ddp::comm::tcp
