#pragma once
// A small all_reduce as our own point-to-point rounds (MPI_Isend/MPI_Irecv tested with
// MPI_Testall) instead of MPI_Iallreduce, whose nonblocking path (libnbc) costs several times the
// blocking call for a few bytes; unlike the blocking call these can be tested, so the op keeps its
// deadline and may start on the caller's thread (MpiRuntime::run_here).
// - Small buffers by recursive doubling, large ones by recursive halving then doubling
//   (Rabenseifner), as MPI's own all_reduce; ranks past the largest power of two fold in first.
// - Every combine takes the lower rank's partial as its left operand, so every rank computes
//   the same value bit for bit (min/max of a NaN, float rounding) whatever its place.
// - Messages are bytes on the group's own point-to-point communicator, tagged with the op's first
//   tag plus its round; the runtime starts an op only within kMaxStepsInFlight of the oldest
//   unfinished one, so ops in flight never match each other's messages. AVG combines as SUM.
#include <mpi.h>

#include <array>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <utility>
#include <vector>

#include "comm/mpi/mpi_runtime.h"
#include "comm/types.h"

namespace ddp::comm::mpi_backend {

// Tags one op may use, and how many ops' tag ranges fit below 32767 (MPI_TAG_UB's minimum):
// the runtime's window of ops in flight (MpiRuntime::kMaxStepsInFlight) must not be larger.
inline constexpr int kP2pTagsPerOp = 32;
inline constexpr int kP2pTagSlots = 1024;
static_assert(MpiRuntime::kMaxStepsInFlight <= kP2pTagSlots);

// A range of a plan's blocks, [lo, hi): the buffer cut into P2pPlan::blocks near-equal parts
// (whole elements). The default, {0, 0}, is the whole buffer.
struct P2pBlocks {
  int lo = 0;
  int hi = 0;
  bool whole() const { return hi == 0; }
  bool operator==(const P2pBlocks&) const = default;
};

// One round of a rank's plan.
struct P2pStep {
  enum class Kind : uint8_t {
    kSend,         // send the buffer (folding in, or handing the result back)
    kRecvResult,   // receive the result into the buffer (a folded rank's last step)
    kRecvCombine,  // receive the peer's data and combine it in (folding in)
    kExchange,     // send `send`, combine in what the peer sends of `recv` (doubling, halving)
    kSwap,         // send `send`, receive the peer's `recv` straight into the buffer (gathering)
  };
  Kind kind = Kind::kSend;
  int peer = 0;
  int tag = 0;              // within the op's range: [0, kP2pTagsPerOp)
  bool peer_first = false;  // the peer's partial is the left operand
  P2pBlocks send;           // what this rank sends (kSend, kExchange, kSwap)
  P2pBlocks recv;           // what it receives (the other kinds)
  bool operator==(const P2pStep&) const = default;
};

// The rounds one rank runs, in order (none when the group has one rank): at most a fold-in,
// log2(size) exchanges (or as many halving and as many swapping rounds) and a fold-out, one
// tag each.
struct P2pPlan {
  std::array<P2pStep, kP2pTagsPerOp> steps{};
  int count = 0;
  int blocks = 1;  // what P2pBlocks count in: the largest power of two <= size
  void add(const P2pStep& s) { steps[static_cast<size_t>(count++)] = s; }
};
// `halving`: recursive halving and doubling where the group allows it (p2p_halving_fits);
// otherwise recursive doubling.
P2pPlan p2p_allreduce_plan(int rank, int size, bool halving = false);
// Whether a group of `size` ranks may halve: its 2 log2(p) rounds and the two folds fit the
// tags one op has.
bool p2p_halving_fits(int size);

struct P2pAllReduceSpec {
  MPI_Comm comm = MPI_COMM_NULL;  // the group's point-to-point communicator
  int rank = 0;
  int size = 1;
  Buffer buf;  // reduced in place
  ReduceOp op = ReduceOp::kSum;
  int first_tag = 0;  // this op's range: [first_tag, first_tag + kP2pTagsPerOp)
  // Eager pieces (mpi_eager_limit.h; 0: none): a message of up to kP2pMaxPieces such pieces is
  // sent as that many equal pieces, each sent eagerly, instead of one that waits for a
  // rendezvous. The same on every rank.
  size_t piece_bytes = 0;
  // Halving and doubling from this many bytes up (DDP_MPI_HALVING_BYTES; the same on every rank).
  size_t halving_bytes = SIZE_MAX;
};

// More pieces than this and one rendezvous costs less than their copies (where the two crossed
// with Open MPI on shared memory).
inline constexpr size_t kP2pMaxPieces = 4;

// A group's spare scratch buffers for its point-to-point all_reduces: an op takes one past
// the inline scratch and gives it back when done with it, on whichever thread drops it, so a
// large all_reduce after the first allocates (and faults in) nothing (a fresh buffer each op
// cost more than MPI's own all_reduce); an op the MPI thread finished is never reused. Keeps
// the kSpares largest given back.
class P2pScratchPool {
 public:
  static constexpr size_t kSpares = 2;
  struct Scratch {
    std::unique_ptr<std::byte[]> data;
    size_t bytes = 0;
  };
  // One of at least `bytes`: a spare, or a new one.
  Scratch take(size_t bytes);
  void give(Scratch scratch);

 private:
  std::mutex mu_;
  std::vector<Scratch> spares_;
};

class P2pAllReduce final : public MpiSteps {
 public:
  P2pAllReduce(const P2pAllReduceSpec& spec, std::shared_ptr<P2pScratchPool> pool);
  ~P2pAllReduce() override;
  P2pAllReduce(const P2pAllReduce&) = delete;
  P2pAllReduce& operator=(const P2pAllReduce&) = delete;
  // Made ready for another op (not while in flight): one object serves a group's ops one after
  // another, with no allocation each (its heap scratch kept while large enough).
  void reset(const P2pAllReduceSpec& spec);

  int start() override;
  int test(bool& done) override;
  std::vector<MPI_Request> abandon() override;

 private:
  static constexpr size_t kInlineScratch = 256;

  int post(const P2pStep& step);
  int post_pieces(std::byte* data, size_t bytes, int peer, int tag, bool send);
  void finish(const P2pStep& step);
  // A range's first element and element count in this op's buffer.
  std::pair<size_t, size_t> span_of(P2pBlocks b) const;

  P2pAllReduceSpec spec_;
  P2pPlan plan_;
  bool halving_ = false;  // the plan's kind
  int current_ = 0;
  std::array<MPI_Request, 2 * kP2pMaxPieces> requests_{};
  int outstanding_ = 0;
  // The peer's data, each round: inline for a few bytes (no allocation), else on the heap.
  alignas(16) std::array<std::byte, kInlineScratch> inline_scratch_{};
  std::shared_ptr<P2pScratchPool> pool_;
  P2pScratchPool::Scratch heap_scratch_;  // from pool_
  std::byte* scratch_ = nullptr;
};

}  // namespace ddp::comm::mpi_backend
