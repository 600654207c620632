#include "comm/tcp/shm_collectives.h"

#include <immintrin.h>
#include <sched.h>

#include <algorithm>
#include <cstring>

#include "comm/reduce_kernels.h"
#include "common/error.h"

namespace ddp::comm::tcp {
namespace {

constexpr Millis kSleepSlice{20};  // futex sleeps are bounded: health and deadline get checked

struct Part {
  size_t off, len;
};
// Rank p's share of n elements split W ways (the first n % W shares get one more).
Part part(size_t n, int w, int p) {
  const size_t base = n / static_cast<size_t>(w), rem = n % static_cast<size_t>(w), up = static_cast<size_t>(p);
  return {up * base + std::min(up, rem), base + (up < rem ? 1 : 0)};
}

char* at(const Buffer& b, size_t elems) { return static_cast<char*>(b.data) + elems * dtype_size(b.dtype); }

// Busy-waits for `ready`: pause-spins for spin_us, then yields the core (staying runnable, so
// a descheduled peer gets it and we are back the moment it publishes) until budget_us. While
// `crowded()` (a peer we wait for shares our CPU) spinning would only hold the core that peer
// needs: yield at once.
template <typename Ready, typename Crowded>
bool spin_until(Ready ready, Crowded crowded, int spin_us, int budget_us) {
  if (ready()) return true;
  if (budget_us <= 0) return false;
  // A peer a few hundred nanoseconds behind is the common case: poll before reading the clock.
  for (int i = 0; i < 64; ++i) {
    _mm_pause();
    if (ready()) return true;
  }
  const auto start = Clock::now();
  const auto spin_end = start + std::chrono::microseconds(std::min(spin_us, budget_us));
  const auto end = start + std::chrono::microseconds(budget_us);
  bool yield = crowded();
  for (unsigned i = 1;; ++i) {
    if (ready()) return true;
    if (yield) {
      sched_yield();
    } else {
      _mm_pause();
    }
    if ((i & 31) != 0) continue;
    const auto now = Clock::now();
    if (now >= end) return false;
    yield = now >= spin_end || crowded();
  }
}

}  // namespace

ShmCollectives::ShmCollectives(ShmSegment segment, Options options, GroupHealth* health)
    : segment_(std::move(segment)), opt_(options), health_(health) {}

template <typename Ready>
bool ShmCollectives::spin(Ready ready, int budget_us) const {
  return spin_until(ready, [this] { return crowded(); }, opt_.spin_us, budget_us);
}

bool ShmCollectives::resumable(const OpDesc& d, const Buffer& in) const {
  switch (d.kind) {
    case OpKind::kBarrier:
    case OpKind::kAllReduce: return true;
    case OpKind::kBroadcast:
    case OpKind::kAllGather:
    case OpKind::kReduceScatter: return in.bytes() <= segment_.geometry().slot_bytes;  // no extra work one-shot
    default: return false;
  }
}

bool ShmCollectives::step(const OpContext& ctx, const Buffer& in, const Buffer& out, FastState& st, bool block,
                          int budget_us) {
  if (st.stage == 0) {
    verified_.assign(static_cast<size_t>(opt_.world), false);
    verified_[static_cast<size_t>(opt_.rank)] = true;
    enter(ctx);
    st.stage = 1;
  }
  const bool ok = ctx.desc.kind == OpKind::kAllReduce && in.bytes() > segment_.geometry().oneshot_bytes
                      ? step_pipelined(ctx, in, st, block, budget_us)
                      : step_oneshot(ctx, in, out, st, block, budget_us);
  if (!ok) return false;
  verify_all(ctx);
  st.stage = 2;
  return true;
}

// A message that fits one slot: the ranks that have data stage all of it, every rank waits
// for every rank, then takes what it needs from the slots. all_reduce reduces every slot in
// rank order (bitwise-identical results everywhere).
bool ShmCollectives::step_oneshot(const OpContext& ctx, const Buffer& in, const Buffer& out, FastState& st,
                                  bool block, int budget_us) {
  auto poll = [&](auto ready) { return block || spin(ready, budget_us); };
  const OpKind kind = ctx.desc.kind;
  const bool stages = kind != OpKind::kBarrier && (kind != OpKind::kBroadcast || ctx.desc.root == opt_.rank);
  if (st.phase == 0) {
    st.ticket = ticket_++;
    st.phase = 1;
  }
  const uint64_t t = st.ticket;
  if (st.phase == 1) {
    if (stages) {
      if (!poll([&] { return slot_free(t); })) return false;
      acquire(t, ctx);
      std::memcpy(slot(opt_.rank, t), in.data, in.bytes());
    }
    publish(Counter::kStaged, t + 1);
    st.phase = 2;
  }
  if (!poll([&] { return reached(Counter::kStaged, t + 1); })) return false;
  wait_all(Counter::kStaged, t + 1, ctx);
  consume_oneshot(ctx, in, out, t);
  publish(Counter::kDone, t + 1);
  return true;
}

void ShmCollectives::consume_oneshot(const OpContext& ctx, const Buffer& in, const Buffer& out, uint64_t t) {
  const int r = opt_.rank, w = opt_.world;
  const ReduceOp rop = ctx.desc.rop;
  switch (ctx.desc.kind) {
    case OpKind::kAllReduce:
      combine3(in.data, slot(0, t), slot(1, t), in.count, in.dtype, rop);
      for (int p = 2; p < w; ++p) combine(in.data, slot(p, t), in.count, in.dtype, rop);
      if (rop == ReduceOp::kAvg) finish_avg(in.data, in.count, in.dtype, w);
      break;
    case OpKind::kBroadcast:
      if (r != ctx.desc.root) std::memcpy(in.data, slot(ctx.desc.root, t), in.bytes());
      break;
    case OpKind::kAllGather:
      for (int p = 0; p < w; ++p) std::memcpy(at(out, in.count * static_cast<size_t>(p)), slot(p, t), in.bytes());
      break;
    case OpKind::kReduceScatter: {
      const size_t off = out.bytes() * static_cast<size_t>(r);
      combine3(out.data, slot(0, t) + off, slot(1, t) + off, out.count, out.dtype, rop);
      for (int p = 2; p < w; ++p) combine(out.data, slot(p, t) + off, out.count, out.dtype, rop);
      if (rop == ReduceOp::kAvg) finish_avg(out.data, out.count, out.dtype, w);
      break;
    }
    default: break;  // barrier
  }
}

// all_reduce as chunked reduce-scatter + all-gather (see the header), resumable per phase.
// One wait per chunk: a peer publishes "staged" for chunk k only after it reduced chunk k-1,
// so that wait also says chunk k-1's reduced slices are ready, and chunk k-1 is copied out
// then. The last chunk's copy-out waits on "reduced".
bool ShmCollectives::step_pipelined(const OpContext& ctx, const Buffer& buf, FastState& st, bool block,
                                    int budget_us) {
  auto poll = [&](auto ready) { return block || spin(ready, budget_us); };
  const size_t es = dtype_size(buf.dtype);
  const size_t chunk = segment_.geometry().slot_bytes / es;
  const int r = opt_.rank, w = opt_.world;
  const ReduceOp rop = ctx.desc.rop;
  // Copies the peers' reduced slices of the chunk at `off` (ticket t) into the buffer.
  auto copy_out = [&](size_t off, uint64_t t) {
    const size_t m = std::min(chunk, buf.count - off);
    for (int p = 0; p < w; ++p) {
      if (p == r) continue;
      const Part s = part(m, w, p);
      std::memcpy(at(buf, off + s.off), slot(p, t) + s.off * es, s.len * es);
    }
    publish(Counter::kDone, t + 1);
  };
  while (st.off < buf.count) {
    const size_t m = std::min(chunk, buf.count - st.off);
    if (st.phase == 0) {
      st.ticket = ticket_++;
      st.phase = 1;
    }
    const uint64_t t = st.ticket;
    char* base = at(buf, st.off);
    char* mine = slot(r, t);
    if (st.phase == 1) {  // stage the slices the peers reduce
      if (!poll([&] { return slot_free(t); })) return false;
      acquire(t, ctx);
      for (int p = 0; p < w; ++p) {
        if (p == r) continue;
        const Part s = part(m, w, p);
        std::memcpy(mine + s.off * es, base + s.off * es, s.len * es);
      }
      publish(Counter::kStaged, t + 1);
      st.phase = 2;
    }
    // Everyone staged chunk k (and so reduced chunk k-1): copy k-1 out, reduce my slice of k.
    if (!poll([&] { return reached(Counter::kStaged, t + 1); })) return false;
    wait_all(Counter::kStaged, t + 1, ctx);
    if (st.off > 0) copy_out(st.off - chunk, t - 1);
    const Part me = part(m, w, r);
    char* dst = base + me.off * es;
    for (int p = 0; p < w; ++p) {
      if (p != r) combine(dst, slot(p, t) + me.off * es, me.len, buf.dtype, rop);
    }
    if (rop == ReduceOp::kAvg) finish_avg(dst, me.len, buf.dtype, w);
    std::memcpy(mine + me.off * es, dst, me.len * es);
    st.phase = 0;
    st.off += m;
    if (st.off >= buf.count) {
      publish(Counter::kReduced, t + 1);
      st.last_off = st.off - m;
      st.last_ticket = t;
    }
  }
  // The last chunk: wait for every peer's reduced slice.
  for (; st.peer < w; ++st.peer) {
    const int p = st.peer;
    if (p == r) continue;
    auto& reduced = segment_.counter(p, Counter::kReduced);
    if (!poll([&] { return reduced.load(std::memory_order_acquire) >= st.last_ticket + 1; })) return false;
    wait_for(p, Counter::kReduced, st.last_ticket + 1, ctx);
  }
  copy_out(st.last_off, st.last_ticket);
  return true;
}

bool ShmCollectives::slot_free(uint64_t ticket) const {
  const auto depth = static_cast<uint64_t>(segment_.geometry().depth);
  return ticket < depth || reached(Counter::kDone, ticket - depth + 1);
}

void ShmCollectives::run(const OpContext& ctx, const Buffer& in, const Buffer& out) {
  if (resumable(ctx.desc, in)) {
    FastState st;
    step(ctx, in, out, st, true, 0);
    return;
  }
  verified_.assign(static_cast<size_t>(opt_.world), false);
  verified_[static_cast<size_t>(opt_.rank)] = true;
  enter(ctx);
  switch (ctx.desc.kind) {
    case OpKind::kAllReduce: break;  // resumable (above)
    case OpKind::kReduce: reduce(ctx, in); break;
    case OpKind::kBroadcast: broadcast(ctx, in); break;
    case OpKind::kAllGather: all_gather(ctx, in, out, true); break;
    case OpKind::kGather: all_gather(ctx, in, out, false); break;
    case OpKind::kScatter: scatter(ctx, in, out); break;
    case OpKind::kReduceScatter: reduce_scatter(ctx, in, out); break;
    case OpKind::kAllToAll: all_to_all(ctx, in, out); break;
    case OpKind::kBarrier: break;  // fast path (above)
  }
  verify_all(ctx);
}

// ---- synchronization ----

template <typename Ready, typename Missing>
void ShmCollectives::wait(Ready ready, Missing missing, const OpContext& ctx) {
  if (spin(ready, opt_.spin_us + opt_.yield_us)) return;
  SegmentHeader& h = segment_.header();
  auto list = [](const std::vector<int>& ranks) {
    std::string out;
    for (int p : ranks) out += (out.empty() ? "" : ", ") + std::to_string(p);
    return out;
  };
  while (true) {
    if (ready()) return;
    health_->check(ctx.label());
    const std::vector<int> late = missing();
    for (int p : late) {
      if (health_->departed(p)) {
        DDP_THROW(NetworkError, ctx.label(), ": rank ", p, " left the group (destroyed it) before this op completed");
      }
    }
    if (ctx.deadline.expired()) {
      DDP_THROW(TimeoutError, ctx.label(), ": timed out after ", ctx.timeout.count(), " ms waiting for ranks [",
                list(late), "] (shared memory)");
    }
    h.waiters.fetch_add(1, std::memory_order_seq_cst);
    const uint32_t seen = h.futex.load(std::memory_order_seq_cst);
    if (!ready()) segment_.sleep(seen, std::min(kSleepSlice, ctx.deadline.remaining() + Millis(1)));
    h.waiters.fetch_sub(1, std::memory_order_seq_cst);
  }
}

bool ShmCollectives::reached(Counter c, uint64_t value) const {
  for (int p = 0; p < opt_.world; ++p) {
    if (p != opt_.rank && segment_.counter(p, c).load(std::memory_order_acquire) < value) return false;
  }
  return true;
}

// Whether a peer last waited on the CPU we run on (so it is queued behind us, or was). Our own
// CPU is published only when it changes: the line is the one peers poll.
bool ShmCollectives::crowded() const {
  const int cpu = sched_getcpu();
  auto& mine = segment_.control(opt_.rank).cpu;
  if (mine.load(std::memory_order_relaxed) != cpu) mine.store(cpu, std::memory_order_relaxed);
  for (int p = 0; p < opt_.world; ++p) {
    if (p != opt_.rank && segment_.control(p).cpu.load(std::memory_order_relaxed) == cpu) return true;
  }
  return false;
}

std::vector<int> ShmCollectives::below(Counter c, uint64_t value) const {
  std::vector<int> out;
  for (int p = 0; p < opt_.world; ++p) {
    if (p != opt_.rank && segment_.counter(p, c).load(std::memory_order_acquire) < value) out.push_back(p);
  }
  return out;
}

void ShmCollectives::wait_for(int peer, Counter c, uint64_t value, const OpContext& ctx) {
  auto& counter = segment_.counter(peer, c);
  wait([&] { return counter.load(std::memory_order_acquire) >= value; }, [&] { return std::vector<int>{peer}; }, ctx);
  verify(peer, ctx);
}

void ShmCollectives::wait_all(Counter c, uint64_t value, const OpContext& ctx) {
  auto ready = [&] { return reached(c, value); };
  auto missing = [&] { return below(c, value); };
  wait(ready, missing, ctx);
  for (int p = 0; p < opt_.world; ++p) verify(p, ctx);
}

void ShmCollectives::acquire(uint64_t ticket, const OpContext& ctx) {
  const auto depth = static_cast<uint64_t>(segment_.geometry().depth);
  if (ticket < depth) return;
  const uint64_t need = ticket - depth + 1;  // peers finished reading the slot's last use
  auto ready = [&] { return reached(Counter::kDone, need); };
  auto missing = [&] { return below(Counter::kDone, need); };
  wait(ready, missing, ctx);
}

void ShmCollectives::enter(const OpContext& ctx) {
  if (!opt_.fingerprints) return;
  RankControl& me = segment_.control(opt_.rank);
  const Fingerprint fp = Fingerprint::of(ctx.desc);
  me.fingerprints[ctx.desc.seq % kFingerprintRing] = fp;
  my_hash_ = fp.hash();
  me.hashes[ctx.desc.seq % 2].store(my_hash_, std::memory_order_relaxed);
  // No wake-up: whoever waits for kEntered is woken by the staged/done publish that follows.
  segment_.counter(opt_.rank, Counter::kEntered).store(ctx.desc.seq + 1, std::memory_order_release);
}

void ShmCollectives::verify(int peer, const OpContext& ctx) {
  if (!opt_.fingerprints || verified_[static_cast<size_t>(peer)]) return;
  verified_[static_cast<size_t>(peer)] = true;
  auto& entered = segment_.counter(peer, Counter::kEntered);
  const uint64_t seq = ctx.desc.seq;
  wait([&] { return entered.load(std::memory_order_acquire) >= seq + 1; }, [&] { return std::vector<int>{peer}; }, ctx);
  // A peer is at most one op ahead (every op ends by checking all), so [seq % 2] is still ours.
  if (segment_.control(peer).hashes[seq % 2].load(std::memory_order_relaxed) == my_hash_) return;
  const Fingerprint mine = Fingerprint::of(ctx.desc);
  const Fingerprint theirs = segment_.control(peer).fingerprints[seq % kFingerprintRing];
  if (!mine.same_op(theirs)) {
    DDP_THROW(InvalidArgument, ctx.label(), ": mismatched collectives: rank ", opt_.rank, " called ", describe(ctx.desc),
              " at seq ", seq, " but rank ", peer, " called ", describe(theirs.desc()), " at seq ", theirs.seq);
  }
}

void ShmCollectives::verify_all(const OpContext& ctx) {
  for (int p = 0; p < opt_.world; ++p) verify(p, ctx);
}

// ---- algorithms ----


// Chunked reduce-scatter, then the root gathers the reduced slices.
void ShmCollectives::reduce(const OpContext& ctx, const Buffer& buf) {
  const size_t es = dtype_size(buf.dtype);
  const size_t chunk = segment_.geometry().slot_bytes / es;
  const int r = opt_.rank, w = opt_.world;
  const bool into_buf = r == ctx.desc.root;
  for (size_t off = 0; off < buf.count; off += chunk) {
    const size_t m = std::min(chunk, buf.count - off);
    const uint64_t t = ticket_++;
    char* base = at(buf, off);
    char* mine = slot(r, t);
    acquire(t, ctx);
    for (int p = 0; p < w; ++p) {
      if (p == r) continue;
      const Part s = part(m, w, p);
      std::memcpy(mine + s.off * es, base + s.off * es, s.len * es);
    }
    publish(Counter::kStaged, t + 1);
    const Part me = part(m, w, r);
    wait_all(Counter::kStaged, t + 1, ctx);
    char* dst = (into_buf ? base : mine) + me.off * es;
    bool first = true;
    for (int p = 0; p < w; ++p) {
      if (p == r) continue;
      const char* src = slot(p, t) + me.off * es;
      if (first && !into_buf) {
        combine3(dst, base + me.off * es, src, me.len, buf.dtype, ctx.desc.rop);
      } else {
        combine(dst, src, me.len, buf.dtype, ctx.desc.rop);
      }
      first = false;
    }
    if (ctx.desc.rop == ReduceOp::kAvg) finish_avg(dst, me.len, buf.dtype, w);
    publish(Counter::kReduced, t + 1);
    if (into_buf) {
      for (int p = 0; p < w; ++p) {
        if (p == r) continue;
        const Part s = part(m, w, p);
        wait_for(p, Counter::kReduced, t + 1, ctx);
        std::memcpy(base + s.off * es, slot(p, t) + s.off * es, s.len * es);
      }
    }
    publish(Counter::kDone, t + 1);
  }
}

void ShmCollectives::broadcast(const OpContext& ctx, const Buffer& buf) {
  const size_t es = dtype_size(buf.dtype);
  const size_t chunk = segment_.geometry().slot_bytes / es;
  const int root = ctx.desc.root;
  for (size_t off = 0; off < buf.count; off += chunk) {
    const size_t m = std::min(chunk, buf.count - off);
    const uint64_t t = ticket_++;
    if (opt_.rank == root) {
      acquire(t, ctx);
      std::memcpy(slot(root, t), at(buf, off), m * es);
      publish(Counter::kStaged, t + 1);
    } else {
      wait_for(root, Counter::kStaged, t + 1, ctx);
      std::memcpy(at(buf, off), slot(root, t), m * es);
    }
    publish(Counter::kDone, t + 1);
  }
}

// all_gather (all) or gather to the root.
void ShmCollectives::all_gather(const OpContext& ctx, const Buffer& in, const Buffer& out, bool all) {
  const size_t es = dtype_size(in.dtype);
  const size_t chunk = segment_.geometry().slot_bytes / es;
  const size_t n = in.count;
  const int r = opt_.rank;
  const bool receives = all || r == ctx.desc.root;
  for (size_t off = 0; off < n; off += chunk) {
    const size_t m = std::min(chunk, n - off);
    const uint64_t t = ticket_++;
    acquire(t, ctx);
    std::memcpy(slot(r, t), at(in, off), m * es);
    publish(Counter::kStaged, t + 1);
    if (receives) {
      char* own = at(out, static_cast<size_t>(r) * n + off);
      if (own != at(in, off)) std::memcpy(own, at(in, off), m * es);
      for (int p = 0; p < opt_.world; ++p) {
        if (p == r) continue;
        wait_for(p, Counter::kStaged, t + 1, ctx);
        std::memcpy(at(out, static_cast<size_t>(p) * n + off), slot(p, t), m * es);
      }
    }
    publish(Counter::kDone, t + 1);
  }
}

void ShmCollectives::scatter(const OpContext& ctx, const Buffer& in, const Buffer& out) {
  const size_t es = dtype_size(out.dtype);
  const size_t piece = segment_.geometry().slot_bytes / static_cast<size_t>(opt_.world) / es;
  const size_t n = out.count;
  const int r = opt_.rank, root = ctx.desc.root;
  for (size_t off = 0; off < n; off += piece) {
    const size_t m = std::min(piece, n - off);
    const uint64_t t = ticket_++;
    if (r == root) {
      acquire(t, ctx);
      for (int p = 0; p < opt_.world; ++p) {
        if (p != r) std::memcpy(slot(r, t) + p * piece * es, at(in, static_cast<size_t>(p) * n + off), m * es);
      }
      publish(Counter::kStaged, t + 1);
      char* own = at(in, static_cast<size_t>(r) * n + off);
      if (own != at(out, off)) std::memcpy(at(out, off), own, m * es);
    } else {
      wait_for(root, Counter::kStaged, t + 1, ctx);
      std::memcpy(at(out, off), slot(root, t) + r * piece * es, m * es);
    }
    publish(Counter::kDone, t + 1);
  }
}

void ShmCollectives::reduce_scatter(const OpContext& ctx, const Buffer& in, const Buffer& out) {
  const size_t es = dtype_size(out.dtype);
  const size_t piece = segment_.geometry().slot_bytes / static_cast<size_t>(opt_.world) / es;
  const size_t n = out.count;
  const int r = opt_.rank, w = opt_.world;
  for (size_t off = 0; off < n; off += piece) {
    const size_t m = std::min(piece, n - off);
    const uint64_t t = ticket_++;
    char* mine = slot(r, t);
    acquire(t, ctx);
    for (int p = 0; p < w; ++p) {
      if (p != r) std::memcpy(mine + p * piece * es, at(in, static_cast<size_t>(p) * n + off), m * es);
    }
    publish(Counter::kStaged, t + 1);
    wait_all(Counter::kStaged, t + 1, ctx);
    char* dst = at(out, off);
    const char* own = at(in, static_cast<size_t>(r) * n + off);
    bool first = true;
    for (int p = 0; p < w; ++p) {
      if (p == r) continue;
      const char* src = slot(p, t) + r * piece * es;
      if (first) {
        combine3(dst, own, src, m, out.dtype, ctx.desc.rop);
      } else {
        combine(dst, src, m, out.dtype, ctx.desc.rop);
      }
      first = false;
    }
    if (ctx.desc.rop == ReduceOp::kAvg) finish_avg(dst, m, out.dtype, w);
    publish(Counter::kDone, t + 1);
  }
}

void ShmCollectives::all_to_all(const OpContext& ctx, const Buffer& in, const Buffer& out) {
  const size_t es = dtype_size(out.dtype);
  const size_t piece = segment_.geometry().slot_bytes / static_cast<size_t>(opt_.world) / es;
  const size_t n = in.count / static_cast<size_t>(opt_.world);
  const int r = opt_.rank, w = opt_.world;
  for (size_t off = 0; off < n; off += piece) {
    const size_t m = std::min(piece, n - off);
    const uint64_t t = ticket_++;
    char* mine = slot(r, t);
    acquire(t, ctx);
    for (int p = 0; p < w; ++p) {
      if (p != r) std::memcpy(mine + p * piece * es, at(in, static_cast<size_t>(p) * n + off), m * es);
    }
    publish(Counter::kStaged, t + 1);
    const size_t own = static_cast<size_t>(r) * n + off;
    if (at(out, own) != at(in, own)) std::memcpy(at(out, own), at(in, own), m * es);
    for (int p = 0; p < w; ++p) {
      if (p == r) continue;
      wait_for(p, Counter::kStaged, t + 1, ctx);
      std::memcpy(at(out, static_cast<size_t>(p) * n + off), slot(p, t) + r * piece * es, m * es);
    }
    publish(Counter::kDone, t + 1);
  }
}

}  // namespace ddp::comm::tcp
