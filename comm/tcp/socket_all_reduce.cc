// SocketCollectives' all_reduce: its one-shot (fingerprints and data together), or the
// algorithms written over any ByteTransport (byte_all_reduce.h), as plan.h says.
#include <cstring>

#include "comm/reduce_kernels.h"
#include "comm/tcp/byte_all_reduce.h"
#include "comm/tcp/socket_collectives.h"

namespace ddp::comm::tcp {

void SocketCollectives::all_reduce(const OpContext& ctx, const Buffer& buf, Algorithm algorithm) {
  switch (algorithm) {
    case Algorithm::kSocketOneshot: return oneshot_all_reduce(ctx, buf);
    case Algorithm::kSocketRing: return ring_all_reduce(*this, scratch_, ctx, buf);
    case Algorithm::kSocketHalvingDoubling: return hd_all_reduce(*this, scratch_, ctx, buf);
    default: return direct_all_reduce(*this, scratch_, ctx, buf);
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

}  // namespace ddp::comm::tcp
