#include "comm/tcp/shm_cross.h"

#include <cerrno>
#include <cstring>

#include "comm/tcp/cross_memory.h"
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

// `what`: "read" (from the peer's buffer) or "write" (into it).
[[noreturn]] void fail(const ShmStep& s, int peer, int32_t pid, const char* what, int err) {
  if (err == ESRCH) {
    DDP_THROW(NetworkError, s.ctx.label(), ": rank ", peer, " (pid ", pid, ") is gone: the cross-memory ",
              what, " of its buffer found no such process");
  }
  DDP_THROW(BackendError, s.ctx.label(), ": the cross-memory ", what, " of rank ", peer, "'s buffer (pid ",
            pid, ") failed: ", std::strerror(err));
}

uint64_t offered(const ShmChannel& ch, const ShmStep& s, int peer) {
  return ch.segment().control(peer).cross[s.ctx.desc.seq % 2][0].load(std::memory_order_relaxed);
}

}  // namespace

bool decide_cross(ShmChannel& ch, ShmStep& s) {
  ShmProgress& st = s.at;
  const uint64_t seq = s.ctx.desc.seq;
  if (!ch.begin_stores(s)) return false;  // rank 0's choice
  if (st.stores == StoreMode::kCross) {
    // Every peer entered: its buffer holds its input, and its offer is published.
    if (!ch.poll([&] { return ch.reached(Counter::kEntered, seq + 1); }, s.poll)) return false;
    ch.wait_all(Counter::kEntered, seq + 1, s.ctx);
    st.cross = all_offered(ch, seq, s.in.bytes()) ? Decided::kTaken : Decided::kDeclined;
  } else {
    st.cross = Decided::kDeclined;
  }
  if (st.cross == Decided::kDeclined && st.stores == StoreMode::kCross) st.stores = StoreMode::kCached;
  return true;
}

void read_from_peer(const ShmChannel& ch, const ShmStep& s, int peer, size_t offset, void* local,
                    size_t bytes) {
  const int32_t pid = ch.segment().probe_of(peer).pid;
  if (const int err = cross_read(pid, offered(ch, s, peer) + offset, local, bytes))
    fail(s, peer, pid, "read", err);
}

void write_to_peer(const ShmChannel& ch, const ShmStep& s, int peer, const void* local, size_t offset,
                   size_t bytes) {
  const int32_t pid = ch.segment().probe_of(peer).pid;
  if (const int err = cross_write(pid, local, offered(ch, s, peer) + offset, bytes))
    fail(s, peer, pid, "write", err);
}

}  // namespace ddp::comm::tcp
