#pragma once
// A small all_reduce as our own point-to-point rounds (MPI_Isend/MPI_Irecv tested with
// MPI_Testall) instead of MPI_Iallreduce: Open MPI's nonblocking collectives (libnbc) cost
// 2-4x its blocking MPI_Allreduce for a few bytes, a pair of point-to-point requests costs
// about what the blocking call does, and unlike the blocking call they can be tested, so the
// op keeps its deadline and may start on the caller's thread (MpiRuntime::run_here).
//
// - The algorithm is recursive doubling (what MPI's own small all_reduce does), with ranks past
//   the largest power of two folded in first (an even rank of the first 2 * rem gives its data
//   to the odd one after it and gets the result back at the end).
// - Every combine takes the lower rank's partial as its left operand, so every rank computes
//   the same value bit for bit (min/max of a NaN, float rounding) whatever its place.
// - Messages are bytes on the group's own point-to-point communicator, each tagged with the
//   op's first tag plus its round, so ops in flight together never match each other's
//   messages: the runtime starts one only within kMaxStepsInFlight of the group's oldest not
//   finished (a window, since they finish out of order), and those have distinct tags.
// - AVG combines as SUM; the caller divides afterwards (as for MPI's ops).
#include <mpi.h>

#include <array>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "comm/mpi/mpi_runtime.h"
#include "comm/types.h"

namespace ddp::comm::mpi_backend {

// Tags one op may use, and how many ops' tag ranges fit below 32767 (MPI_TAG_UB's minimum):
// the runtime's window of ops in flight (MpiRuntime::kMaxStepsInFlight) must not be larger.
inline constexpr int kP2pTagsPerOp = 32;
inline constexpr int kP2pTagSlots = 1024;
static_assert(MpiRuntime::kMaxStepsInFlight <= kP2pTagSlots);

// One round of a rank's plan.
struct P2pStep {
  enum class Kind : uint8_t {
    kSend,         // send the buffer (folding in, or handing the result back)
    kRecvResult,   // receive the result into the buffer (a folded rank's last step)
    kRecvCombine,  // receive the peer's data and combine it in (folding in)
    kExchange,     // send the buffer and combine in what the peer sends (recursive doubling)
  };
  Kind kind = Kind::kSend;
  int peer = 0;
  int tag = 0;              // within the op's range: [0, kP2pTagsPerOp)
  bool peer_first = false;  // the peer's partial is the left operand
  bool operator==(const P2pStep&) const = default;
};

// The rounds one rank runs, in order (none when the group has one rank): at most a fold-in,
// log2(size) exchanges and a fold-out, one tag each.
struct P2pPlan {
  std::array<P2pStep, kP2pTagsPerOp> steps{};
  int count = 0;
  void add(const P2pStep& s) { steps[static_cast<size_t>(count++)] = s; }
};
P2pPlan p2p_allreduce_plan(int rank, int size);

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
};

// More pieces than this and one rendezvous costs less than their copies (Open MPI 4.1, shared
// memory, 2 ranks: 12 KiB as 4 pieces 2.5 us, whole 3.4; 16 KiB as 5 pieces 3.4, whole 3.7;
// 32 KiB as 9 pieces 9.2, whole 5.8).
inline constexpr size_t kP2pMaxPieces = 4;

class P2pAllReduce final : public MpiSteps {
 public:
  explicit P2pAllReduce(const P2pAllReduceSpec& spec);
  // Made ready for another op (not while in flight): one object serves a group's ops one after
  // another, with no allocation each (its heap scratch kept while large enough).
  void reset(const P2pAllReduceSpec& spec);

  int start() override;
  int test(bool& done) override;
  std::vector<MPI_Request> abandon() override;

 private:
  static constexpr size_t kInlineScratch = 256;

  int post(const P2pStep& step);
  int post_pieces(std::byte* data, int peer, int tag, bool send);
  void finish(const P2pStep& step);

  P2pAllReduceSpec spec_;
  P2pPlan plan_;
  int current_ = 0;
  size_t piece_ = 0;  // bytes per message: the whole buffer, or an eager piece of it
  std::array<MPI_Request, 2 * kP2pMaxPieces> requests_{};
  int outstanding_ = 0;
  // The peer's data, each round: inline for a few bytes (no allocation), else on the heap.
  alignas(16) std::array<std::byte, kInlineScratch> inline_scratch_{};
  std::unique_ptr<std::byte[]> heap_scratch_;
  size_t heap_bytes_ = 0;
  std::byte* scratch_ = nullptr;
};

}  // namespace ddp::comm::mpi_backend
