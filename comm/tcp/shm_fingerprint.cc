#include "comm/tcp/shm_fingerprint.h"

#include "common/error.h"

namespace ddp::comm::tcp {

ShmFingerprints::ShmFingerprints(const ShmSegment* segment, const ShmWait* wait, int rank, int world,
                                 bool enabled)
    : segment_(segment), wait_(wait), rank_(rank), world_(world), enabled_(enabled) {}

namespace {

// The fingerprint's hash with the entry tickets folded in (an odd multiplier is a bijection;
// the shift keeps the hash's low bit, which makes it never 0).
uint64_t op_hash(const Fingerprint& fp, uint64_t tickets) {
  return fp.hash() ^ ((tickets * 0x9e3779b97f4a7c15ull) << 1);
}

}  // namespace

void ShmFingerprints::begin(const OpContext& ctx, uint64_t tickets) {
  if (!enabled_) return;
  verified_.assign(static_cast<size_t>(world_), false);
  verified_[static_cast<size_t>(rank_)] = true;
  RankControl& me = segment_->control(rank_);
  const Fingerprint fp = Fingerprint::of(ctx.desc);
  me.fingerprints[ctx.desc.seq % kFingerprintRing] = fp;
  me.entry_tickets[ctx.desc.seq % kFingerprintRing] = tickets;
  my_hash_ = op_hash(fp, tickets);
  my_tickets_ = tickets;
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
  const uint64_t tickets = segment_->control(peer).entry_tickets[seq % kFingerprintRing];
  if (tickets != my_tickets_) {
    DDP_THROW(BackendError, ctx.label(), ": the ranks' shared-memory schedules parted: rank ", rank_,
              " entered this op after ", my_tickets_, " tickets, rank ", peer, " after ", tickets,
              " (a bug in the tcp backend, not in the program: please report it with this message)");
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
