#pragma once
// What the tcp backend knows about one collective while it runs: its description (the
// fingerprint every rank must agree on), its deadline, and the group's health.
//
// - OpDesc is the agreement: kind, dtype, count, root and reduce op at a sequence number.
//   Fingerprint is its fixed-size image, written into shared memory or sent on a socket, so
//   ranks that call different collectives get an error naming both sides.
// - GroupHealth records the first fatal failure (a lost peer, a timeout, a mismatch, an abort).
//   Once broken, every pending and later op fails with an error of the same type naming itself.
// Thread-safe: GroupHealth is read by every thread of the group.
#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>

#include "comm/types.h"
#include "common/deadline.h"

namespace ddp::comm::tcp {

enum class OpKind : uint8_t {
  kBroadcast,
  kAllReduce,
  kReduce,
  kAllGather,
  kGather,
  kScatter,
  kReduceScatter,
  kAllToAll,
  kBarrier
};
const char* to_string(OpKind kind);

struct OpDesc {
  OpKind kind = OpKind::kBarrier;
  DType dtype = DType::kUInt8;
  ReduceOp rop = ReduceOp::kSum;
  int32_t root = -1;   // -1 when the op has none
  uint64_t count = 0;  // per-rank element count (see TcpProcessGroup for each op's choice)
  uint64_t seq = 0;
};
// "all_reduce(float32 x 1000, sum)", "broadcast(int8 x 5, root 1)".
std::string describe(const OpDesc& d);

// The 24-byte image exchanged between ranks. `valid` distinguishes a written entry from zeros.
struct Fingerprint {
  uint64_t seq = 0;
  uint64_t count = 0;
  int32_t root = 0;
  uint8_t kind = 0, dtype = 0, rop = 0, valid = 0;
  static Fingerprint of(const OpDesc& d);
  uint64_t hash() const;  // of every field; never 0
  OpDesc desc() const;
  bool same_op(const Fingerprint& o) const {
    return seq == o.seq && count == o.count && root == o.root && kind == o.kind && dtype == o.dtype &&
           rop == o.rop;
  }
};
static_assert(sizeof(Fingerprint) == 24);

// kAborted: ProcessGroup::abort (rethrown as Aborted: "<op>: aborted: <reason>").
enum class FailureKind : uint8_t { kNone, kNetwork, kTimeout, kMismatch, kOther, kAborted };

class GroupHealth {
 public:
  bool broken() const { return broken_.load(std::memory_order_acquire); }
  // Records the failure if it is the first; later ones are ignored. `peer` is -1 when unknown.
  void fail(FailureKind kind, int peer, const std::string& reason);
  // Throws the recorded failure as seen by the op `label` (NetworkError for a lost peer).
  [[noreturn]] void rethrow(const std::string& label) const;
  void check(const std::string& label) const {
    if (broken()) rethrow(label);
  }
  int lost_peer() const;
  FailureKind kind() const;

  // A peer that destroyed its group cleanly (said goodbye) is not a failure by itself: ops
  // that still need it fail, the rest go on. Call init() before any other thread runs.
  void init(int world);
  void mark_departed(int peer) {
    departed_[static_cast<size_t>(peer)].store(true, std::memory_order_release);
  }
  bool departed(int peer) const {
    return departed_[static_cast<size_t>(peer)].load(std::memory_order_acquire);
  }

 private:
  std::unique_ptr<std::atomic<bool>[]> departed_;
  std::atomic<bool> broken_{false};
  mutable std::mutex mu_;
  FailureKind kind_ = FailureKind::kNone;
  int peer_ = -1;
  std::string reason_;
};

struct OpContext {
  OpDesc desc;
  const std::string* group = nullptr;  // the group's name (outlives the op)
  Deadline deadline;  // set when the op is queued (an op run inline on the caller needs none)
  Millis timeout{0};
  // "all_reduce (seq 5) on group 'world'": built on first use (errors), not on the fast path.
  const std::string& label() const;

 private:
  mutable std::string label_;
};

}  // namespace ddp::comm::tcp
