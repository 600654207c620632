#include "comm/tcp/shm_fingerprint.h"

#include "common/error.h"

namespace ddp::comm::tcp {

ShmFingerprints::ShmFingerprints(const ShmSegment* segment, const ShmWait* wait, int rank, int world,
                                 bool enabled)
    : segment_(segment), wait_(wait), rank_(rank), world_(world), enabled_(enabled) {}

void ShmFingerprints::begin(const OpContext& ctx) {
  if (!enabled_) return;
  verified_.assign(static_cast<size_t>(world_), false);
  verified_[static_cast<size_t>(rank_)] = true;
  RankControl& me = segment_->control(rank_);
  const Fingerprint fp = Fingerprint::of(ctx.desc);
  me.fingerprints[ctx.desc.seq % kFingerprintRing] = fp;
  my_hash_ = fp.hash();
  me.hashes[ctx.desc.seq % 2].store(my_hash_, std::memory_order_relaxed);
}

void ShmFingerprints::verify(int peer, const OpContext& ctx) {
  if (!enabled_ || verified_[static_cast<size_t>(peer)]) return;
  verified_[static_cast<size_t>(peer)] = true;
  auto& entered = segment_->counter(peer, Counter::kEntered);
  const uint64_t seq = ctx.desc.seq;
  wait_->wait([&] { return entered.load(std::memory_order_acquire) >= seq + 1; },
              [&] { return std::vector<int>{peer}; }, ctx);
  // A peer is at most one op ahead (every op ends by checking all), so [seq % 2] is still ours.
  if (segment_->control(peer).hashes[seq % 2].load(std::memory_order_relaxed) == my_hash_) return;
  const Fingerprint mine = Fingerprint::of(ctx.desc);
  const Fingerprint theirs = segment_->control(peer).fingerprints[seq % kFingerprintRing];
  if (!mine.same_op(theirs)) {
    DDP_THROW(InvalidArgument, ctx.label(), ": mismatched collectives: rank ", rank_, " called ",
              describe(ctx.desc), " at seq ", seq, " but rank ", peer, " called ", describe(theirs.desc()),
              " at seq ", theirs.seq);
  }
}

void ShmFingerprints::verify_if_entered(int peer, const OpContext& ctx) {
  if (!enabled_ || verified_[static_cast<size_t>(peer)]) return;
  if (segment_->counter(peer, Counter::kEntered).load(std::memory_order_acquire) >= ctx.desc.seq + 1) {
    verify(peer, ctx);
  }
}

void ShmFingerprints::verify_all(const OpContext& ctx) {
  for (int p = 0; p < world_; ++p) verify(p, ctx);
}

}  // namespace ddp::comm::tcp
