#include "comm/tcp/shm_allreduce_direct.h"

#include <algorithm>

#include "comm/copy_kernel.h"
#include "comm/reduce_kernels.h"
#include "comm/tcp/shm_allreduce_cross.h"
#include "comm/tcp/shm_cross.h"
#include "comm/tcp/shm_peer_buffers.h"
#include "comm/tcp/shm_region.h"

namespace ddp::comm::tcp {
bool allreduce_direct_step(ShmChannel& ch, ShmStep& s) {
  return direct_step(
      ch, s, [&] { return allreduce_cross_step(ch, s); },
      [&] { reduce_share(ch, s, PeerBuffers::mapped(ch, s)); });
}

bool decide_direct(ShmChannel& ch, ShmStep& s) {
  const uint64_t seq = s.ctx.desc.seq;
  // Every peer entered: its buffer holds its input, and its tag is published.
  if (!ch.poll([&] { return ch.reached(Counter::kEntered, seq + 1); }, s.poll)) return false;
  ch.wait_all(Counter::kEntered, seq + 1, s.ctx);
  s.at.direct = Decided::kTaken;
  for (int p = 0; p < ch.world(); ++p) {
    if (p != ch.rank() &&
        ch.segment().control(p).direct[seq % 2].load(std::memory_order_relaxed) != s.direct->tag)
      s.at.direct = Decided::kDeclined;
  }
  return true;
}

bool in_place_pass(ShmChannel& ch, ShmStep& s, const std::function<void()>& reduce_share_direct) {
  ShmProgress& st = s.at;
  if (st.phase == 0) {
    st.ticket = ch.next_ticket();
    reduce_share_direct();
    // The ticket's slots were never used: staged and done keep the counters in step for the
    // ops after this one; reduced (published last: it wakes) says this rank's share is written.
    ch.segment().counter(ch.rank(), Counter::kStaged).store(st.ticket + 1, std::memory_order_relaxed);
    ch.segment().counter(ch.rank(), Counter::kDone).store(st.ticket + 1, std::memory_order_relaxed);
    ch.publish(Counter::kReduced, st.ticket + 1);
    st.phase = 1;
  }
  // Nobody returns while a peer may still write into its buffer.
  if (!ch.poll([&] { return ch.reached(Counter::kReduced, st.ticket + 1); }, s.poll)) return false;
  ch.wait_all(Counter::kReduced, st.ticket + 1, s.ctx);
  return true;
}

bool direct_step(ShmChannel& ch, ShmStep& s, const std::function<bool()>& fallback,
                 const std::function<void()>& reduce_share) {
  if (s.at.direct == Decided::kNotYet && !decide_direct(ch, s)) return false;
  if (s.at.direct == Decided::kDeclined) return fallback();
  return in_place_pass(ch, s, reduce_share);
}

bool cross_step(ShmChannel& ch, ShmStep& s, const std::function<bool()>& fallback,
                const std::function<void()>& reduce_share) {
  if (s.at.cross == Decided::kNotYet && !decide_cross(ch, s)) return false;  // polled, not yet decided
  if (s.at.cross == Decided::kDeclined) return fallback();
  return in_place_pass(ch, s, [&] { timed(s.at, reduce_share); });
}

}  // namespace ddp::comm::tcp
