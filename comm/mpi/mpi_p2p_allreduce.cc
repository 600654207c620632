#include "comm/mpi/mpi_p2p_allreduce.h"

#include <algorithm>
#include <bit>

#include "comm/reduce_kernels.h"

namespace ddp::comm::mpi_backend {
namespace {

constexpr int kFoldInTag = 0;
constexpr int kFoldOutTag = kP2pTagsPerOp - 1;

// Ranks that take part in recursive doubling are numbered 0..pow2-1 ("virtual" ranks).
struct Layout {
  int pow2 = 1;  // the largest power of two <= size
  int rem = 0;   // size - pow2: the even ranks of [0, 2 * rem) fold into the odd ones
  int real(int virt) const { return virt < rem ? 2 * virt + 1 : virt + rem; }
};

}  // namespace

P2pPlan p2p_allreduce_plan(int rank, int size) {
  using Kind = P2pStep::Kind;
  P2pPlan plan;
  if (size <= 1) return plan;
  Layout l;
  l.pow2 = static_cast<int>(std::bit_floor(static_cast<unsigned>(size)));
  l.rem = size - l.pow2;
  const bool folded = rank < 2 * l.rem;
  if (folded && rank % 2 == 0) {  // gives its data away, gets the result at the end
    plan.add({Kind::kSend, rank + 1, kFoldInTag, false});
    plan.add({Kind::kRecvResult, rank + 1, kFoldOutTag, false});
    return plan;
  }
  if (folded) plan.add({Kind::kRecvCombine, rank - 1, kFoldInTag, true});
  const int virt = folded ? rank / 2 : rank - l.rem;
  int round = 1;
  for (int mask = 1; mask < l.pow2; mask <<= 1, ++round) {
    const int peer = l.real(virt ^ mask);
    plan.add({Kind::kExchange, peer, round, peer < rank});
  }
  if (folded) plan.add({Kind::kSend, rank - 1, kFoldOutTag, false});
  return plan;
}

P2pAllReduce::P2pAllReduce(const P2pAllReduceSpec& spec) { reset(spec); }

void P2pAllReduce::reset(const P2pAllReduceSpec& spec) {
  if (spec.rank != spec_.rank || spec.size != spec_.size || plan_.count == 0) {
    plan_ = p2p_allreduce_plan(spec.rank, spec.size);
  }
  spec_ = spec;
  current_ = 0;
  outstanding_ = 0;
  const size_t bytes = spec_.buf.bytes();
  piece_ = bytes;
  if (spec_.piece_bytes > 0 && bytes > spec_.piece_bytes) {
    const size_t pieces = (bytes + spec_.piece_bytes - 1) / spec_.piece_bytes;
    if (pieces <= kP2pMaxPieces) piece_ = (bytes + pieces - 1) / pieces;
  }
  if (bytes <= kInlineScratch) {
    scratch_ = inline_scratch_.data();
    return;
  }
  if (bytes > heap_bytes_) {
    heap_scratch_ = std::make_unique_for_overwrite<std::byte[]>(bytes);
    heap_bytes_ = bytes;
  }
  scratch_ = heap_scratch_.get();
}

int P2pAllReduce::post_pieces(std::byte* data, int peer, int tag, bool send) {
  const size_t bytes = spec_.buf.bytes();
  for (size_t at = 0; at < bytes; at += piece_) {
    const int n = static_cast<int>(std::min(piece_, bytes - at));
    MPI_Request* r = &requests_[static_cast<size_t>(outstanding_++)];
    const int rc = send ? MPI_Isend(data + at, n, MPI_BYTE, peer, tag, spec_.comm, r)
                        : MPI_Irecv(data + at, n, MPI_BYTE, peer, tag, spec_.comm, r);
    if (rc != MPI_SUCCESS) return rc;  // pieces of one tag match in order: posted in order
  }
  return MPI_SUCCESS;
}

int P2pAllReduce::post(const P2pStep& step) {
  using Kind = P2pStep::Kind;
  auto* buf = static_cast<std::byte*>(spec_.buf.data);
  const int tag = spec_.first_tag + step.tag;
  int rc = MPI_SUCCESS;
  if (step.kind == Kind::kRecvCombine || step.kind == Kind::kExchange) {
    rc = post_pieces(scratch_, step.peer, tag, false);
  } else if (step.kind == Kind::kRecvResult) {
    rc = post_pieces(buf, step.peer, tag, false);
  }
  if (rc == MPI_SUCCESS && (step.kind == Kind::kSend || step.kind == Kind::kExchange)) {
    rc = post_pieces(buf, step.peer, tag, true);
  }
  return rc;
}

void P2pAllReduce::finish(const P2pStep& step) {
  if (step.kind != P2pStep::Kind::kRecvCombine && step.kind != P2pStep::Kind::kExchange) return;
  const Buffer& b = spec_.buf;
  const void* left = step.peer_first ? static_cast<const void*>(scratch_) : b.data;
  const void* right = step.peer_first ? b.data : static_cast<const void*>(scratch_);
  combine3(b.data, left, right, b.count, b.dtype, spec_.op);
}

int P2pAllReduce::start() {
  current_ = 0;
  return plan_.count == 0 ? MPI_SUCCESS : post(plan_.steps[0]);
}

int P2pAllReduce::test(bool& done) {
  done = false;
  while (current_ < plan_.count) {
    int flag = 0;
    const int rc = MPI_Testall(outstanding_, requests_.data(), &flag, MPI_STATUSES_IGNORE);
    if (rc != MPI_SUCCESS || !flag) return rc;
    outstanding_ = 0;
    finish(plan_.steps[static_cast<size_t>(current_)]);
    if (++current_ < plan_.count) {
      if (const int posted = post(plan_.steps[static_cast<size_t>(current_)]); posted != MPI_SUCCESS)
        return posted;
    }
  }
  done = true;
  return MPI_SUCCESS;
}

std::vector<MPI_Request> P2pAllReduce::abandon() {
  std::vector<MPI_Request> left;
  for (int i = 0; i < outstanding_; ++i) {
    MPI_Request& r = requests_[static_cast<size_t>(i)];
    if (r == MPI_REQUEST_NULL) continue;
    MPI_Cancel(&r);  // a receive not yet matched completes cancelled
    left.push_back(r);
  }
  outstanding_ = 0;
  current_ = plan_.count;
  return left;
}

}  // namespace ddp::comm::mpi_backend
