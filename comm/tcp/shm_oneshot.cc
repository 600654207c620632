#include "comm/tcp/shm_oneshot.h"

#include <cstring>

#include "comm/copy_kernel.h"
#include "comm/reduce_kernels.h"

namespace ddp::comm::tcp {
namespace {

// A rank's staged small value (after its kEntered): the half's word, or its wide line.
struct SmallValue {
  uint64_t words[kWideBytes / sizeof(uint64_t)];
};
void small_of(const ShmChannel& ch, int rank, int half, size_t bytes, SmallValue& v) {
  const RankControl& c = ch.segment().control(rank);
  if (bytes <= sizeof(uint64_t)) {
    v.words[0] = c.small[half].load(std::memory_order_relaxed);
    return;
  }
  for (size_t i = 0; i * sizeof(uint64_t) < bytes; ++i)
    v.words[i] = c.wide[half][i].load(std::memory_order_relaxed);
}

// A small broadcast: the root's value, on every other rank.
void take_root_value(const ShmChannel& ch, const ShmStep& s) {
  const int root = s.ctx.desc.root;
  if (ch.rank() == root) return;
  SmallValue v;
  small_of(ch, root, ch.small_half(), s.in.bytes(), v);
  std::memcpy(s.in.data, v.words, s.in.bytes());
}

// The all_reduce of the small values, in rank order (the same result on every rank).
void consume_small(ShmChannel& ch, const ShmStep& s) {
  const Buffer& in = s.in;
  const ReduceOp rop = s.ctx.desc.rop;
  const int half = ch.small_half();
  const size_t bytes = in.bytes();
  SmallValue a, b;
  small_of(ch, 0, half, bytes, a);
  small_of(ch, 1, half, bytes, b);
  combine3(in.data, a.words, b.words, in.count, in.dtype, rop);
  for (int p = 2; p < ch.world(); ++p) {
    small_of(ch, p, half, bytes, a);
    combine(in.data, a.words, in.count, in.dtype, rop);
  }
  if (rop == ReduceOp::kAvg) finish_avg(in.data, in.count, in.dtype, ch.world());
}

// Every rank staged ticket t: take what this rank needs.
void consume(ShmChannel& ch, const ShmStep& s, uint64_t t) {
  const int r = ch.rank(), w = ch.world();
  const ReduceOp rop = s.ctx.desc.rop;
  const Buffer &in = s.in, &out = s.out;
  switch (s.ctx.desc.kind) {
    case OpKind::kAllReduce:
      combine3(in.data, ch.slot(0, t), ch.slot(1, t), in.count, in.dtype, rop);
      for (int p = 2; p < w; ++p) combine(in.data, ch.slot(p, t), in.count, in.dtype, rop);
      if (rop == ReduceOp::kAvg) finish_avg(in.data, in.count, in.dtype, w);
      break;
    case OpKind::kBroadcast:
      if (r != s.ctx.desc.root) copy_bytes(in.data, ch.slot(s.ctx.desc.root, t), in.bytes());
      break;
    case OpKind::kAllGather:
      for (int p = 0; p < w; ++p)
        copy_bytes(at(out, in.count * static_cast<size_t>(p)), ch.slot(p, t), in.bytes());
      break;
    case OpKind::kReduceScatter: {
      const size_t off = out.bytes() * static_cast<size_t>(r);
      combine3(out.data, ch.slot(0, t) + off, ch.slot(1, t) + off, out.count, out.dtype, rop);
      for (int p = 2; p < w; ++p) combine(out.data, ch.slot(p, t) + off, out.count, out.dtype, rop);
      if (rop == ReduceOp::kAvg) finish_avg(out.data, out.count, out.dtype, w);
      break;
    }
    default: break;  // barrier
  }
}

}  // namespace

bool oneshot_small(const OpDesc& d, const Buffer& in) {
  return (d.kind == OpKind::kAllReduce || d.kind == OpKind::kBroadcast) && in.bytes() <= kWideBytes;
}

bool oneshot_fits(const OpDesc& d, const Buffer& in, const ShmGeometry& g) {
  switch (d.kind) {
    case OpKind::kBarrier: return true;
    case OpKind::kAllReduce: return in.bytes() <= g.oneshot_bytes;
    case OpKind::kBroadcast:
    case OpKind::kAllGather:
    case OpKind::kReduceScatter: return in.bytes() <= g.slot_bytes;  // no extra work one-shot
    default: return false;
  }
}

bool oneshot_step(ShmChannel& ch, ShmStep& s) {
  auto poll = [&](auto ready) { return ch.poll(ready, s.poll); };
  const OpKind kind = s.ctx.desc.kind;
  const bool stages =
      kind != OpKind::kBarrier && (kind != OpKind::kBroadcast || s.ctx.desc.root == ch.rank());
  if (oneshot_small(s.ctx.desc, s.in)) {  // staged by begin, with kEntered: no ticket, no kDone
    const uint64_t entered = s.ctx.desc.seq + 1;
    if (!poll([&] { return ch.reached(Counter::kEntered, entered); })) return false;
    ch.wait_all(Counter::kEntered, entered, s.ctx);
    if (s.ctx.desc.kind == OpKind::kBroadcast) {
      take_root_value(ch, s);
    } else {
      consume_small(ch, s);
    }
    return true;
  }
  ShmProgress& st = s.at;
  if (st.phase == 0) {
    st.ticket = ch.next_ticket();
    st.phase = 1;
  }
  const uint64_t t = st.ticket;
  if (st.phase == 1) {
    if (stages) {
      if (!poll([&] { return ch.slot_free(t); })) return false;
      ch.acquire(t, s.ctx);
      timed_if(s, [&] { copy_bytes(ch.slot(ch.rank(), t), s.in.data, s.in.bytes()); });
    }
    ch.publish(Counter::kStaged, t + 1);
    st.phase = 2;
  }
  if (!poll([&] { return ch.reached(Counter::kStaged, t + 1); })) return false;
  ch.wait_all(Counter::kStaged, t + 1, s.ctx);
  timed_if(s, [&] { consume(ch, s, t); });
  ch.publish(Counter::kDone, t + 1);
  return true;
}

}  // namespace ddp::comm::tcp
