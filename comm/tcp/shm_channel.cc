#include "comm/tcp/shm_channel.h"

#include <algorithm>
#include <cstring>

#include "comm/copy_kernel.h"

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
  wait_.wait([&] { return reached(Counter::kDone, tickets); },
             [&] { return late(Counter::kDone, tickets, ctx); }, ctx);
}

namespace {

// `bytes` (at most 8) at p as the low bytes of a word. Whole-width loads: a narrow memcpy into a
// word on the stack and the word's load back stalls store forwarding.
uint64_t small_word(const unsigned char* p, size_t bytes) {
  switch (bytes) {
    case 8: {
      uint64_t v;
      std::memcpy(&v, p, 8);
      return v;
    }
    case 4: {
      uint32_t v;
      std::memcpy(&v, p, 4);
      return v;
    }
    case 2: {
      uint16_t v;
      std::memcpy(&v, p, 2);
      return v;
    }
    default: {
      uint64_t v = 0;
      for (size_t i = 0; i < bytes; ++i) v |= static_cast<uint64_t>(p[i]) << (8 * i);
      return v;
    }
  }
}

// This rank's small all_reduce input into the half's word (at most 8 bytes) or wide line.
void stage_small(RankControl& me, int half, const Buffer& b) {
  const auto* p = static_cast<const unsigned char*>(b.data);
  const size_t bytes = b.bytes();
  if (bytes <= sizeof(uint64_t)) {
    me.small[half].store(small_word(p, bytes), std::memory_order_relaxed);
    return;
  }
  for (size_t i = 0, off = 0; off < bytes; ++i, off += sizeof(uint64_t)) {
    me.wide[half][i].store(small_word(p + off, std::min(sizeof(uint64_t), bytes - off)),
                           std::memory_order_relaxed);
  }
}

}  // namespace

void publish_copy(StoreMode mode, char* slot, const void* from, size_t bytes) {
  if (mode == StoreMode::kStreaming) {
    copy_bytes_streaming(slot, from, bytes);
  } else {
    copy_bytes(slot, from, bytes);
  }
}

void ShmChannel::begin(const OpContext& ctx, const ShmEntry& e) {
  fingerprints_.begin(ctx, ticket_);
  const uint64_t seq = ctx.desc.seq;
  RankControl& me = segment_.control(opt_.rank);
  me.direct[seq % 2].store(e.direct_tag, std::memory_order_relaxed);
  me.cross[seq % 2][0].store(e.cross != nullptr ? reinterpret_cast<uint64_t>(e.cross->data) : 0,
                             std::memory_order_relaxed);
  me.cross[seq % 2][1].store(e.cross != nullptr ? e.cross->bytes() : 0, std::memory_order_relaxed);
  if (opt_.rank == 0) me.stores[seq % 2].store(static_cast<uint32_t>(e.stores), std::memory_order_relaxed);
  if (e.small != nullptr) {
    // The halves serve small ops in turn (the same on every rank). No wait to rewrite one: it
    // was last written for the small op before last, and this rank finished the one between,
    // which needed every peer to enter it, which each did after it finished (read) the one before.
    // A broadcast's peers read only the root's value.
    small_half_ ^= 1;
    if (ctx.desc.kind != OpKind::kBroadcast || ctx.desc.root == opt_.rank)
      stage_small(me, small_half_, *e.small);  // before kEntered
  }
  if (e.direct_tag != 0 || e.cross != nullptr || e.small != nullptr) {
    publish(Counter::kEntered, seq + 1);
  } else {
    // No wake-up: whoever waits for kEntered is woken by the staged/done publish that follows.
    segment_.counter(opt_.rank, Counter::kEntered).store(seq + 1, std::memory_order_release);
  }
}

bool ShmChannel::begin_stores(ShmStep& step) {
  ShmProgress& st = step.at;
  if (st.stores_known) return true;
  if (opt_.rank == 0) {
    st.stores = step.stores;
  } else {
    const uint64_t seq = step.ctx.desc.seq;
    auto& entered = segment_.counter(0, Counter::kEntered);
    if (!poll([&] { return entered.load(std::memory_order_acquire) >= seq + 1; }, step.poll)) return false;
    wait_for(0, Counter::kEntered, seq + 1, step.ctx);
    st.stores = static_cast<StoreMode>(segment_.control(0).stores[seq % 2].load(std::memory_order_relaxed));
  }
  st.stores_known = true;
  return true;
}

bool ShmChannel::reached(Counter c, uint64_t value) const {
  for (int p = 0; p < opt_.world; ++p) {
    if (p != opt_.rank && segment_.counter(p, c).load(std::memory_order_acquire) < value) return false;
  }
  return true;
}

std::vector<int> ShmChannel::late(Counter c, uint64_t value, const OpContext& ctx) {
  std::vector<int> out;
  for (int p = 0; p < opt_.world; ++p) {
    if (p == opt_.rank || segment_.counter(p, c).load(std::memory_order_acquire) >= value) continue;
    fingerprints_.verify_if_entered(p, ctx);  // late because it runs another op: say so
    out.push_back(p);
  }
  return out;
}

void ShmChannel::wait_for(int peer, Counter c, uint64_t value, const OpContext& ctx) {
  auto& counter = segment_.counter(peer, c);
  wait_.wait([&] { return counter.load(std::memory_order_acquire) >= value; },
             [&] {
               fingerprints_.verify_if_entered(peer, ctx);
               return std::vector<int>{peer};
             },
             ctx);
  fingerprints_.verify(peer, ctx);
}

void ShmChannel::wait_all(Counter c, uint64_t value, const OpContext& ctx) {
  wait_.wait([&] { return reached(c, value); }, [&] { return late(c, value, ctx); }, ctx);
  for (int p = 0; p < opt_.world; ++p) fingerprints_.verify(p, ctx);
}

void exchange_pieces(ShmChannel& ch, ShmStep& s, size_t block,
                     const std::function<void(const PieceChunk&)>& take) {
  const size_t es = dtype_size(s.in.dtype);
  const size_t piece = ch.geometry().slot_bytes / static_cast<size_t>(ch.world()) / es;
  const int r = ch.rank();
  ch.begin_stores(s);  // blocking: true
  for (size_t off = 0; off < block; off += piece) {
    const PieceChunk c{ch.next_ticket(), off, std::min(piece, block - off), piece};
    char* mine = ch.slot(r, c.t);
    ch.acquire(c.t, s.ctx);
    timed(s.at, [&] {
      for (int p = 0; p < ch.world(); ++p) {
        if (p != r)
          publish_copy(s.at.stores, mine + p * piece * es, at(s.in, static_cast<size_t>(p) * block + off),
                       c.m * es);
      }
    });
    ch.publish(Counter::kStaged, c.t + 1);
    take(c);
    ch.publish(Counter::kDone, c.t + 1);
  }
}

}  // namespace ddp::comm::tcp
