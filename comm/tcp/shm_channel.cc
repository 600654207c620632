#include "comm/tcp/shm_channel.h"

namespace ddp::comm::tcp {

ShmChannel::ShmChannel(ShmSegment segment, Options options, GroupHealth* health)
    : segment_(std::move(segment)),
      opt_(options),
      wait_(&segment_, {options.rank, options.world, options.spin_us, options.yield_us, options.blocked},
            health),
      fingerprints_(&segment_, &wait_, options.rank, options.world, options.fingerprints) {}

bool ShmChannel::slot_free(uint64_t ticket) const {
  const auto depth = static_cast<uint64_t>(segment_.geometry().depth);
  return ticket < depth || reached(Counter::kDone, ticket - depth + 1);
}

void ShmChannel::acquire(uint64_t ticket, const OpContext& ctx) {
  const auto depth = static_cast<uint64_t>(segment_.geometry().depth);
  if (ticket < depth) return;
  wait_done(ticket - depth + 1, ctx);  // peers finished reading the slot's last use
}

void ShmChannel::wait_done(uint64_t tickets, const OpContext& ctx) {
  wait_.wait([&] { return reached(Counter::kDone, tickets); }, [&] { return below(Counter::kDone, tickets); },
             ctx);
}

void ShmChannel::begin(const OpContext& ctx, uint64_t direct_tag) {
  fingerprints_.begin(ctx);
  const uint64_t seq = ctx.desc.seq;
  segment_.control(opt_.rank).direct[seq % 2].store(direct_tag, std::memory_order_relaxed);
  if (direct_tag != 0) {
    publish(Counter::kEntered, seq + 1);
  } else {
    // No wake-up: whoever waits for kEntered is woken by the staged/done publish that follows.
    segment_.counter(opt_.rank, Counter::kEntered).store(seq + 1, std::memory_order_release);
  }
}

bool ShmChannel::reached(Counter c, uint64_t value) const {
  for (int p = 0; p < opt_.world; ++p) {
    if (p != opt_.rank && segment_.counter(p, c).load(std::memory_order_acquire) < value) return false;
  }
  return true;
}

std::vector<int> ShmChannel::below(Counter c, uint64_t value) const {
  std::vector<int> out;
  for (int p = 0; p < opt_.world; ++p) {
    if (p != opt_.rank && segment_.counter(p, c).load(std::memory_order_acquire) < value) out.push_back(p);
  }
  return out;
}

void ShmChannel::wait_for(int peer, Counter c, uint64_t value, const OpContext& ctx) {
  auto& counter = segment_.counter(peer, c);
  wait_.wait([&] { return counter.load(std::memory_order_acquire) >= value; },
             [&] { return std::vector<int>{peer}; }, ctx);
  fingerprints_.verify(peer, ctx);
}

void ShmChannel::wait_all(Counter c, uint64_t value, const OpContext& ctx) {
  wait_.wait([&] { return reached(c, value); }, [&] { return below(c, value); }, ctx);
  for (int p = 0; p < opt_.world; ++p) fingerprints_.verify(p, ctx);
}

}  // namespace ddp::comm::tcp
