#include "comm/tcp/shm_allreduce_cross.h"

#include <algorithm>
#include <cstring>

#include "comm/reduce_kernels.h"
#include "comm/tcp/cross_memory.h"
#include "comm/tcp/shm_allreduce_chunked.h"
#include "comm/tcp/shm_allreduce_direct.h"
#include "common/error.h"

namespace ddp::comm::tcp {
namespace {

// Every rank, this one too, offered a buffer of this op's length for op seq (after every peer
// entered it): the same answer on every rank.
bool all_offered(const ShmChannel& ch, uint64_t seq, uint64_t bytes) {
  for (int p = 0; p < ch.world(); ++p) {
    const auto& tag = ch.segment().control(p).cross[seq % 2];
    if (tag[0].load(std::memory_order_relaxed) == 0 || tag[1].load(std::memory_order_relaxed) != bytes)
      return false;
  }
  return true;
}

// `what`: "read" (its share of the peer's buffer) or "write" (the result into it).
[[noreturn]] void fail(const ShmStep& s, int peer, int32_t pid, const char* what, int err) {
  if (err == ESRCH) {
    DDP_THROW(NetworkError, s.ctx.label(), ": rank ", peer, " (pid ", pid, ") is gone: the cross-memory ",
              what, " of its buffer found no such process");
  }
  DDP_THROW(BackendError, s.ctx.label(), ": the cross-memory ", what, " of rank ", peer, "'s buffer (pid ",
            pid, ") failed: ", std::strerror(err));
}

// Reduces this rank's share from every rank's buffer and writes it into all of them.
void reduce_share(const ShmChannel& ch, const ShmStep& s) {
  const Buffer& buf = s.in;
  const size_t es = dtype_size(buf.dtype);
  const ReduceOp rop = s.ctx.desc.rop;
  const uint64_t seq = s.ctx.desc.seq;
  const Part me = part(buf.count, ch.world(), ch.rank());
  const size_t chunk = std::max<size_t>(1, std::min(ch.geometry().slot_bytes, s.scratch.size()) / es);
  for (size_t off = me.off; off < me.off + me.len; off += chunk) {
    const size_t n = std::min(chunk, me.off + me.len - off);
    char* dst = at(buf, off);
    for (int p = 0; p < ch.world(); ++p) {
      if (p == ch.rank()) continue;
      const int32_t pid = ch.segment().probe_of(p).pid;
      const uint64_t theirs = ch.segment().control(p).cross[seq % 2][0].load(std::memory_order_relaxed);
      if (const int err = cross_read(pid, theirs + off * es, s.scratch.data(), n * es))
        fail(s, p, pid, "read", err);
      combine(dst, s.scratch.data(), n, buf.dtype, rop);
    }
    if (rop == ReduceOp::kAvg) finish_avg(dst, n, buf.dtype, ch.world());
    for (int p = 0; p < ch.world(); ++p) {
      if (p == ch.rank()) continue;
      const int32_t pid = ch.segment().probe_of(p).pid;
      const uint64_t theirs = ch.segment().control(p).cross[seq % 2][0].load(std::memory_order_relaxed);
      if (const int err = cross_write(pid, dst, theirs + off * es, n * es)) fail(s, p, pid, "write", err);
    }
  }
}

}  // namespace

bool allreduce_cross_step(ShmChannel& ch, ShmStep& s) {
  ShmProgress& st = s.at;
  const uint64_t seq = s.ctx.desc.seq;
  if (st.cross == 0) {
    if (!ch.begin_stores(s)) return false;  // rank 0's choice
    if (st.stores == StoreMode::kCross) {
      // Every peer entered: its buffer holds its input, and its offer is published.
      if (!ch.poll([&] { return ch.reached(Counter::kEntered, seq + 1); }, s.poll)) return false;
      ch.wait_all(Counter::kEntered, seq + 1, s.ctx);
      st.cross = all_offered(ch, seq, s.in.bytes()) ? 1 : -1;
    } else {
      st.cross = -1;
    }
    if (st.cross < 0 && st.stores == StoreMode::kCross) st.stores = StoreMode::kCached;
  }
  if (st.cross < 0) return allreduce_chunked_step(ch, s);
  return in_place_pass(ch, s, [&] { timed(st, [&] { reduce_share(ch, s); }); });
}

}  // namespace ddp::comm::tcp
