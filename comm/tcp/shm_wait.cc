#include "comm/tcp/shm_wait.h"

#include <algorithm>
#include <string>

#include "common/error.h"

namespace ddp::comm::tcp {
namespace {
constexpr Millis kSleepSlice{20};  // futex sleeps are bounded: health and deadline get checked

std::string list(const std::vector<int>& ranks) {
  std::string out;
  for (int p : ranks) out += (out.empty() ? "" : ", ") + std::to_string(p);
  return out;
}
}  // namespace

// Our own CPU is published only when it changes: the line is the one peers poll.
bool ShmWait::crowded() const {
  const int cpu = sched_getcpu();
  auto& mine = segment_->control(opt_.rank).cpu;
  if (mine.load(std::memory_order_relaxed) != cpu) mine.store(cpu, std::memory_order_relaxed);
  for (int p = 0; p < opt_.world; ++p) {
    if (p != opt_.rank && segment_->control(p).cpu.load(std::memory_order_relaxed) == cpu) return true;
  }
  return false;
}

bool ShmWait::any_departed(const std::vector<int>& ranks) const {
  return std::any_of(ranks.begin(), ranks.end(), [this](int p) { return health_->departed(p); });
}

void ShmWait::check(const std::vector<int>& late, const OpContext& ctx) const {
  health_->check(ctx.label());
  for (int p : late) {
    if (health_->departed(p)) {
      DDP_THROW(NetworkError, ctx.label(), ": rank ", p,
                " left the group (destroyed it) before this op completed");
    }
  }
  if (ctx.deadline.expired()) {
    DDP_THROW(TimeoutError, ctx.label(), ": timed out after ", ctx.timeout.count(), " ms waiting for ranks [",
              list(late), "] (shared memory)");
  }
}

void ShmWait::sleep(uint32_t seen, const OpContext& ctx) const {
  segment_->sleep(seen, std::min(kSleepSlice, ctx.deadline.remaining() + Millis(1)));
}

}  // namespace ddp::comm::tcp
