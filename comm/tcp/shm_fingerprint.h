#pragma once
// ShmFingerprints: the check that every rank of a shared-memory group runs the same op.
// begin(ctx) writes this rank's OpDesc (its fingerprint, and a hash of it on the counters' cache
// line) before the channel marks the op entered, before it touches data. The first time the op
// depends on a peer, verify(peer) waits until that peer entered the same seq and compares hashes
// (the full fingerprints only on a mismatch, for the message); every op ends with verify_all, so
// no rank runs more than one op ahead. A mismatch is InvalidArgument naming both ranks' ops.
// The hash also covers the tickets (shm_channel.h) the rank had taken: ranks whose tickets
// differ would wait on each other forever, so that is a BackendError naming both (a bug in the
// backend, not the caller's), raised where it first shows instead of a later timeout.
// Disabled: every call returns at once. Called by one thread at a time.
#include <vector>

#include "comm/tcp/op.h"
#include "comm/tcp/shm_segment.h"
#include "comm/tcp/shm_wait.h"

namespace ddp::comm::tcp {

class ShmFingerprints {
 public:
  // `segment` and `wait` outlive this object.
  ShmFingerprints(const ShmSegment* segment, const ShmWait* wait, int rank, int world, bool enabled);

  // A new op, entered after `tickets` tickets: publish it, nobody verified yet.
  void begin(const OpContext& ctx, uint64_t tickets);
  void verify(int peer, const OpContext& ctx);  // once per peer and op
  // verify() if the peer has entered this op, without waiting: a peer that is late because it
  // runs another op (one that never publishes what this one waits for) is named at once.
  void verify_if_entered(int peer, const OpContext& ctx);
  void verify_all(const OpContext& ctx);  // the op's end

 private:
  const ShmSegment* segment_;
  const ShmWait* wait_;
  int rank_;
  int world_;
  bool enabled_;
  uint64_t my_hash_ = 0;  // the hash of the running op's fingerprint and entry tickets
  uint64_t my_tickets_ = 0;
  std::vector<bool> verified_;
};

}  // namespace ddp::comm::tcp
