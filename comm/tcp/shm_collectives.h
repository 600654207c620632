#pragma once
// ShmCollectives: every collective of a group whose ranks share one host, through the
// group's ShmSegment. One pass over the data where possible:
//
// - all_reduce: small messages one-shot (each rank stages its buffer, every rank reduces all
//   slots in rank order: identical results everywhere). Larger ones run reduce-scatter +
//   all-gather in cache-sized chunks: a rank stages the slices peers reduce, reduces its own
//   slice reading its buffer and the peers' slots, publishes it, and copies the peers' reduced
//   slices out. Staged data stays in cache, so memory sees one read and one write per byte.
// - broadcast, reduce, (all_)gather, scatter, reduce_scatter, all_to_all: the same chunked
//   stage / consume scheme; broadcast, all_gather and reduce_scatter whose input fits one
//   slot go one-shot (stage all, wait for all, take what is needed); barrier: counters only.
// - Fingerprints: each op writes its OpDesc before it touches data; the first time a rank
//   depends on a peer within an op it compares the peer's, and every op ends by checking all
//   (so no rank runs more than one op ahead). A mismatch is InvalidArgument naming both sides.
// Waits spin briefly, then yield the core for a while (both short when ranks outnumber cores:
// a spinning rank would steal the core of the peer it waits for; no spinning either while a
// peer last waited on this rank's CPU, as when the scheduler stacks two ranks on one core),
// then futex-sleep in slices, checking GroupHealth (a lost peer: NetworkError) and the op's
// deadline (TimeoutError naming the ranks that had not arrived). Called by one thread at a
// time (the group's worker).
#include <vector>

#include "comm/tcp/op.h"
#include "comm/tcp/shm_segment.h"
#include "comm/types.h"

namespace ddp::comm::tcp {

class ShmCollectives {
 public:
  struct Options {
    int rank = 0;
    int world = 1;
    bool fingerprints = true;
    int spin_us = 200;    // busy-wait this long first (0 when ranks outnumber cores) ...
    int yield_us = 20000;  // ... then yield the core this long, then futex-sleep
  };
  ShmCollectives(ShmSegment segment, Options options, GroupHealth* health);

  // Runs ctx.desc.kind. Buffers as ProcessGroup defines them (out unused where the op has none).
  void run(const OpContext& ctx, const Buffer& in, const Buffer& out);

  // Resumable ops (barrier, all_reduce; broadcast, all_gather and reduce_scatter whose input
  // fits one slot): the caller's thread can run them without a hand-off to the worker.
  // step() runs the op as far as it can; with `block` false it stops when a wait on a peer
  // exceeds budget_us and returns false, its place kept in `state`; step(..., true) later (on
  // the worker) completes it.
  struct FastState {
    int stage = 0;  // 0: not started, 1: running, 2: done
    int phase = 0;  // within the current ticket
    int peer = 0;   // copy-out progress
    uint64_t ticket = 0;
    size_t off = 0;  // pipelined: elements reduced
    size_t last_off = 0;
    uint64_t last_ticket = 0;
  };
  bool resumable(const OpDesc& d, const Buffer& in) const;
  bool step(const OpContext& ctx, const Buffer& in, const Buffer& out, FastState& state, bool block, int budget_us);
  const ShmSegment& segment() const { return segment_; }

 private:
  bool step_oneshot(const OpContext& ctx, const Buffer& in, const Buffer& out, FastState& st, bool block,
                    int budget_us);
  void consume_oneshot(const OpContext& ctx, const Buffer& in, const Buffer& out, uint64_t ticket);
  bool step_pipelined(const OpContext& ctx, const Buffer& buf, FastState& st, bool block, int budget_us);
  bool slot_free(uint64_t ticket) const;
  void reduce(const OpContext& ctx, const Buffer& buf);
  void broadcast(const OpContext& ctx, const Buffer& buf);
  void all_gather(const OpContext& ctx, const Buffer& in, const Buffer& out, bool all);
  void scatter(const OpContext& ctx, const Buffer& in, const Buffer& out);
  void reduce_scatter(const OpContext& ctx, const Buffer& in, const Buffer& out);
  void all_to_all(const OpContext& ctx, const Buffer& in, const Buffer& out);

  void enter(const OpContext& ctx);
  void verify(int peer, const OpContext& ctx);
  void verify_all(const OpContext& ctx);
  void acquire(uint64_t ticket, const OpContext& ctx);  // my slot for `ticket` is free
  void wait_for(int peer, Counter c, uint64_t value, const OpContext& ctx);
  void wait_all(Counter c, uint64_t value, const OpContext& ctx);
  std::vector<int> below(Counter c, uint64_t value) const;  // peers whose counter is < value
  bool reached(Counter c, uint64_t value) const;            // every peer's counter is >= value
  bool crowded() const;                                     // a peer waited on our CPU last
  void publish(Counter c, uint64_t value) { segment_.publish(opt_.rank, c, value); }
  template <typename Ready>
  bool spin(Ready ready, int budget_us) const;  // spin_until with this group's policy
  template <typename Ready, typename Missing>
  void wait(Ready ready, Missing missing, const OpContext& ctx);
  char* slot(int rank, uint64_t ticket) const { return segment_.slot(rank, ticket); }

  ShmSegment segment_;
  Options opt_;
  GroupHealth* health_;
  uint64_t ticket_ = 0;
  uint64_t my_hash_ = 0;  // the fingerprint hash of the running op (enter)
  std::vector<bool> verified_;
};

}  // namespace ddp::comm::tcp
