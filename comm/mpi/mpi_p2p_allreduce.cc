#include "comm/mpi/mpi_p2p_allreduce.h"

#include <algorithm>
#include <bit>

#include "comm/reduce_kernels.h"
#include "common/error.h"

namespace ddp::comm::mpi_backend {
namespace {

constexpr int kFoldInTag = 0;
constexpr int kFoldOutTag = kP2pTagsPerOp - 1;

// Recursive doubling: log2(p) exchanges of the whole buffer. Halving then doubling: the buffer
// is cut into p blocks; 2(p-1)/p of it is sent. The fold: an even rank of the first 2 * rem
// gives its data to the odd one after it and gets the result back at the end.
// Ranks that take part in recursive doubling are numbered 0..pow2-1 ("virtual" ranks).
struct Layout {
  int pow2 = 1;  // the largest power of two <= size
  int rem = 0;   // size - pow2: the even ranks of [0, 2 * rem) fold into the odd ones
  int real(int virt) const { return virt < rem ? 2 * virt + 1 : virt + rem; }
};

Layout layout_of(int size) {
  Layout l;
  l.pow2 = static_cast<int>(std::bit_floor(static_cast<unsigned>(size)));
  l.rem = size - l.pow2;
  return l;
}

// Recursive halving, then doubling, among the pow2 ranks that remain after the fold
// (Rabenseifner). Halving keeps the half of the range whose blocks have this rank's bit, top
// bit first, so each rank ends holding block `virt` reduced; each doubling round swaps the
// aligned range of `mask` blocks it holds for its peer's.
void add_halving(P2pPlan& plan, const Layout& l, int rank, int virt) {
  using Kind = P2pStep::Kind;
  int round = 1;
  P2pBlocks range{0, l.pow2};
  for (int mask = l.pow2 / 2; mask >= 1; mask /= 2, ++round) {
    const int mid = range.lo + (range.hi - range.lo) / 2;
    const bool upper = (virt & mask) != 0;
    const P2pBlocks keep = upper ? P2pBlocks{mid, range.hi} : P2pBlocks{range.lo, mid};
    const P2pBlocks give = upper ? P2pBlocks{range.lo, mid} : P2pBlocks{mid, range.hi};
    const int peer = l.real(virt ^ mask);
    plan.add({Kind::kExchange, peer, round, peer < rank, give, keep});
    range = keep;
  }
  for (int mask = 1; mask < l.pow2; mask *= 2, ++round) {
    const int mine = virt & ~(mask - 1);
    const int theirs = (virt ^ mask) & ~(mask - 1);
    plan.add({Kind::kSwap, l.real(virt ^ mask), round, false, {mine, mine + mask}, {theirs, theirs + mask}});
  }
}

}  // namespace

bool p2p_halving_fits(int size) {
  if (size <= 1) return false;
  return 2 * std::countr_zero(static_cast<unsigned>(layout_of(size).pow2)) + 2 <= kP2pTagsPerOp;
}

P2pPlan p2p_allreduce_plan(int rank, int size, bool halving) {
  using Kind = P2pStep::Kind;
  P2pPlan plan;
  if (size <= 1) return plan;
  const Layout l = layout_of(size);
  plan.blocks = l.pow2;
  const bool folded = rank < 2 * l.rem;
  if (folded && rank % 2 == 0) {  // gives its data away, gets the result at the end
    plan.add({Kind::kSend, rank + 1, kFoldInTag, false, {}, {}});
    plan.add({Kind::kRecvResult, rank + 1, kFoldOutTag, false, {}, {}});
    return plan;
  }
  if (folded) plan.add({Kind::kRecvCombine, rank - 1, kFoldInTag, true, {}, {}});
  const int virt = folded ? rank / 2 : rank - l.rem;
  if (halving && p2p_halving_fits(size)) {
    add_halving(plan, l, rank, virt);
  } else {
    int round = 1;
    for (int mask = 1; mask < l.pow2; mask <<= 1, ++round) {
      const int peer = l.real(virt ^ mask);
      plan.add({Kind::kExchange, peer, round, peer < rank, {}, {}});
    }
  }
  if (folded) plan.add({Kind::kSend, rank - 1, kFoldOutTag, false, {}, {}});
  return plan;
}

P2pScratchPool::Scratch P2pScratchPool::take(size_t bytes) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto fits =
        std::find_if(spares_.begin(), spares_.end(), [&](const Scratch& s) { return s.bytes >= bytes; });
    if (fits != spares_.end()) {
      Scratch got = std::move(*fits);
      spares_.erase(fits);
      return got;
    }
  }
  return {std::make_unique_for_overwrite<std::byte[]>(bytes), bytes};
}

void P2pScratchPool::give(Scratch scratch) {
  if (!scratch.data) return;
  std::lock_guard<std::mutex> lock(mu_);
  spares_.push_back(std::move(scratch));
  std::sort(spares_.begin(), spares_.end(),
            [](const Scratch& a, const Scratch& b) { return a.bytes > b.bytes; });
  if (spares_.size() > kSpares) spares_.pop_back();  // the smallest
}

P2pAllReduce::P2pAllReduce(const P2pAllReduceSpec& spec, std::shared_ptr<P2pScratchPool> pool)
    : pool_(std::move(pool)) {
  DDP_CHECK(pool_, "a point-to-point all_reduce without its group's scratch pool");
  reset(spec);
}

P2pAllReduce::~P2pAllReduce() { pool_->give(std::move(heap_scratch_)); }

void P2pAllReduce::reset(const P2pAllReduceSpec& spec) {
  const bool halving = spec.buf.bytes() >= spec.halving_bytes && p2p_halving_fits(spec.size);
  if (spec.rank != spec_.rank || spec.size != spec_.size || halving != halving_ || plan_.count == 0) {
    plan_ = p2p_allreduce_plan(spec.rank, spec.size, halving);
    halving_ = halving;
  }
  spec_ = spec;
  current_ = 0;
  outstanding_ = 0;
  const size_t bytes = spec_.buf.bytes();
  if (bytes <= kInlineScratch) {
    scratch_ = inline_scratch_.data();
    return;
  }
  if (bytes > heap_scratch_.bytes) {
    pool_->give(std::move(heap_scratch_));
    heap_scratch_ = pool_->take(bytes);
  }
  scratch_ = heap_scratch_.data.get();
}

std::pair<size_t, size_t> P2pAllReduce::span_of(P2pBlocks b) const {
  const size_t count = spec_.buf.count;
  if (b.whole()) return {0, count};
  const auto at = [&](int block) {
    return count * static_cast<size_t>(block) / static_cast<size_t>(plan_.blocks);
  };
  return {at(b.lo), at(b.hi) - at(b.lo)};
}

// A message of `bytes`, as one or (a few eager pieces past the limit) several.
int P2pAllReduce::post_pieces(std::byte* data, size_t bytes, int peer, int tag, bool send) {
  size_t piece = bytes;
  if (spec_.piece_bytes > 0 && bytes > spec_.piece_bytes) {
    const size_t pieces = (bytes + spec_.piece_bytes - 1) / spec_.piece_bytes;
    if (pieces <= kP2pMaxPieces) piece = (bytes + pieces - 1) / pieces;
  }
  for (size_t at = 0; at < bytes; at += piece) {
    const int n = static_cast<int>(std::min(piece, bytes - at));
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
  const size_t es = dtype_size(spec_.buf.dtype);
  const int tag = spec_.first_tag + step.tag;
  int rc = MPI_SUCCESS;
  const auto [at, n] = span_of(step.recv);
  if (step.kind == Kind::kRecvCombine || step.kind == Kind::kExchange) {
    rc = post_pieces(scratch_, n * es, step.peer, tag, false);
  } else if (step.kind == Kind::kRecvResult || step.kind == Kind::kSwap) {
    rc = post_pieces(buf + at * es, n * es, step.peer, tag, false);
  }
  if (rc == MPI_SUCCESS &&
      (step.kind == Kind::kSend || step.kind == Kind::kExchange || step.kind == Kind::kSwap)) {
    const auto [from, m] = span_of(step.send);
    rc = post_pieces(buf + from * es, m * es, step.peer, tag, true);
  }
  return rc;
}

void P2pAllReduce::finish(const P2pStep& step) {
  if (step.kind != P2pStep::Kind::kRecvCombine && step.kind != P2pStep::Kind::kExchange) return;
  const Buffer& b = spec_.buf;
  const auto [at, n] = span_of(step.recv);
  void* mine = static_cast<std::byte*>(b.data) + at * dtype_size(b.dtype);
  const void* left = step.peer_first ? static_cast<const void*>(scratch_) : mine;
  const void* right = step.peer_first ? mine : static_cast<const void*>(scratch_);
  combine3(mine, left, right, n, b.dtype, spec_.op);
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
