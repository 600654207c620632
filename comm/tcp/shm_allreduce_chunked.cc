#include "comm/tcp/shm_allreduce_chunked.h"

#include <algorithm>

#include "comm/copy_kernel.h"
#include "comm/reduce_kernels.h"

namespace ddp::comm::tcp {
namespace {

// Copies the peers' reduced slices of the chunk at `off` (ticket t, `chunk` elements at most)
// into the buffer, and says this rank is done with ticket t.
void copy_out(ShmChannel& ch, const Buffer& buf, size_t chunk, size_t off, uint64_t t) {
  const size_t es = dtype_size(buf.dtype);
  const size_t m = std::min(chunk, buf.count - off);
  for (int p = 0; p < ch.world(); ++p) {
    if (p == ch.rank()) continue;
    const Part s = part(m, ch.world(), p);
    copy_bytes(at(buf, off + s.off), ch.slot(p, t) + s.off * es, s.len * es);
  }
  ch.publish(Counter::kDone, t + 1);
}

// Stages the slices of the chunk at `base` (m elements) the peers reduce.
void stage(ShmChannel& ch, StoreMode mode, char* mine, const char* base, size_t m, size_t es) {
  for (int p = 0; p < ch.world(); ++p) {
    if (p == ch.rank()) continue;
    const Part s = part(m, ch.world(), p);
    publish_copy(mode, mine + s.off * es, base + s.off * es, s.len * es);
  }
}

// Reduces this rank's slice of the chunk at `base` with the peers' staged copies, in place,
// and publishes it in this rank's slot.
void reduce_mine(ShmChannel& ch, const ShmStep& s, char* base, size_t m, uint64_t t) {
  const Buffer& buf = s.in;
  const size_t es = dtype_size(buf.dtype);
  const ReduceOp rop = s.ctx.desc.rop;
  const Part me = part(m, ch.world(), ch.rank());
  char* dst = base + me.off * es;
  char* mine = ch.slot(ch.rank(), t) + me.off * es;
  // The last peer's combine also publishes the result, in the same pass (AVG divides first;
  // streaming stores are a copy of their own).
  const int last = ch.rank() == ch.world() - 1 ? ch.world() - 2 : ch.world() - 1;
  const bool fused = rop != ReduceOp::kAvg && s.at.stores == StoreMode::kCached;
  for (int p = 0; p < ch.world(); ++p) {
    if (p == ch.rank()) continue;
    const char* theirs = ch.slot(p, t) + me.off * es;
    if (p == last && fused) {
      combine_copy(dst, theirs, mine, me.len, buf.dtype, rop);
      return;
    }
    combine(dst, theirs, me.len, buf.dtype, rop);
  }
  if (rop == ReduceOp::kAvg) finish_avg(dst, me.len, buf.dtype, ch.world());
  publish_copy(s.at.stores, mine, dst, me.len * es);
}

}  // namespace

bool allreduce_chunked_step(ShmChannel& ch, ShmStep& s) {
  auto poll = [&](auto ready) { return ch.poll(ready, s.poll); };
  const Buffer& buf = s.in;
  const size_t es = dtype_size(buf.dtype);
  const size_t chunk = ch.geometry().slot_bytes / es;
  ShmProgress& st = s.at;
  if (!ch.begin_stores(s)) return false;
  while (st.off < buf.count) {
    const size_t m = std::min(chunk, buf.count - st.off);
    if (st.phase == 0) {
      st.ticket = ch.next_ticket();
      st.phase = 1;
    }
    const uint64_t t = st.ticket;
    char* base = at(buf, st.off);
    if (st.phase == 1) {
      if (!poll([&] { return ch.slot_free(t); })) return false;
      ch.acquire(t, s.ctx);
      timed(st, [&] { stage(ch, st.stores, ch.slot(ch.rank(), t), base, m, es); });
      ch.publish(Counter::kStaged, t + 1);
      st.phase = 2;
    }
    // Everyone staged chunk k (and so reduced chunk k-1): copy k-1 out, reduce my slice of k.
    if (!poll([&] { return ch.reached(Counter::kStaged, t + 1); })) return false;
    ch.wait_all(Counter::kStaged, t + 1, s.ctx);
    timed(st, [&] {
      if (st.off > 0) copy_out(ch, buf, chunk, st.off - chunk, t - 1);
      reduce_mine(ch, s, base, m, t);
    });
    st.phase = 0;
    st.off += m;
    if (st.off >= buf.count) {
      ch.publish(Counter::kReduced, t + 1);
      st.last_off = st.off - m;
      st.last_ticket = t;
    }
  }
  // The last chunk: wait for every peer's reduced slice.
  for (; st.peer < ch.world(); ++st.peer) {
    const int p = st.peer;
    if (p == ch.rank()) continue;
    auto& reduced = ch.segment().counter(p, Counter::kReduced);
    if (!poll([&] { return reduced.load(std::memory_order_acquire) >= st.last_ticket + 1; })) return false;
    ch.wait_for(p, Counter::kReduced, st.last_ticket + 1, s.ctx);
  }
  timed(st, [&] { copy_out(ch, buf, chunk, st.last_off, st.last_ticket); });
  return true;
}

}  // namespace ddp::comm::tcp
