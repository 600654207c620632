// The point-to-point all_reduce's plans (recursive doubling; halving and doubling), run
// symbolically: every rank of groups of 1 to 40 ranks follows its plan against message queues
// (a send is delivered by (source, destination, tag), a range of blocks); every rank must end with every
// rank's data combined exactly once, in the same order on every rank (the same expression: the same bits),
// and no message may be left unread. The real MPI runs are in mpi_process_group_test (under mpirun with 2 and
// 3 ranks).
#include "comm/mpi/mpi_p2p_allreduce.h"

#include <doctest/doctest.h>

#include <cctype>
#include <map>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

using ddp::comm::mpi_backend::p2p_allreduce_plan;
using ddp::comm::mpi_backend::P2pBlocks;
using ddp::comm::mpi_backend::P2pPlan;
using ddp::comm::mpi_backend::P2pStep;
using Kind = P2pStep::Kind;

namespace {

// "x3": rank 3's data.
std::string term(int rank) {
  std::string t = std::to_string(rank);
  t.insert(t.begin(), 'x');
  return t;
}

std::string sum(const std::string& left, const std::string& right) {
  std::string e;
  e.append("(").append(left).append("+").append(right).append(")");
  return e;
}

// Each rank's buffer is the plan's blocks, each an expression; a message carries a range of them.
struct Simulation {
  std::vector<P2pPlan> plans;
  std::vector<int> next;                        // each rank's current step
  std::vector<bool> sent;                       // its send went out (posted with the step, as MPI_Isend is)
  std::vector<std::vector<std::string>> value;  // each rank's blocks, as expressions
  std::map<std::tuple<int, int, int>, std::vector<std::vector<std::string>>> wire;  // (from, to, tag)

  Simulation(int size, bool halving) {
    for (int r = 0; r < size; ++r) {
      plans.push_back(p2p_allreduce_plan(r, size, halving));
      next.push_back(0);
      sent.push_back(false);
      value.emplace_back(static_cast<size_t>(plans.back().blocks), term(r));
    }
  }

  std::pair<int, int> range(int r, P2pBlocks b) const {
    return b.whole() ? std::pair{0, plans[r].blocks} : std::pair{b.lo, b.hi};
  }

  // Runs rank r's current step if its message has arrived: whether it did.
  bool step(int r) {
    if (next[r] == plans[r].count) return false;
    const P2pStep& s = plans[r].steps[static_cast<size_t>(next[r])];
    bool moved = false;
    if (s.kind != Kind::kRecvResult && s.kind != Kind::kRecvCombine && !sent[r]) {
      const auto [lo, hi] = range(r, s.send);
      wire[{r, s.peer, s.tag}].emplace_back(value[r].begin() + lo, value[r].begin() + hi);
      sent[r] = moved = true;
    }
    if (s.kind != Kind::kSend) {
      auto& q = wire[{s.peer, r, s.tag}];
      if (q.empty()) return moved;
      const std::vector<std::string> got = q.front();
      q.erase(q.begin());
      const auto [lo, hi] = range(r, s.recv);
      REQUIRE(got.size() == static_cast<size_t>(hi - lo));  // the peer sent what this rank takes
      for (int b = lo; b < hi; ++b) {
        std::string& mine = value[r][static_cast<size_t>(b)];
        const std::string& theirs = got[static_cast<size_t>(b - lo)];
        const bool combine = s.kind == Kind::kRecvCombine || s.kind == Kind::kExchange;
        mine = !combine ? theirs : s.peer_first ? sum(theirs, mine) : sum(mine, theirs);
      }
    }
    ++next[r];
    sent[r] = false;
    return true;
  }

  void run() {
    for (bool moved = true; moved;) {
      moved = false;
      for (int r = 0; r < static_cast<int>(plans.size()); ++r) moved |= step(r);
    }
  }
};

int count_of(const std::string& expr, const std::string& term) {
  int n = 0;
  for (size_t at = expr.find(term); at != std::string::npos; at = expr.find(term, at + 1)) {
    const size_t end = at + term.size();
    if (end == expr.size() || !std::isdigit(static_cast<unsigned char>(expr[end]))) ++n;
  }
  return n;
}

}  // namespace

TEST_CASE("p2p all_reduce plan: every rank gets every rank's data once, in one order, for 1 to 40 ranks") {
  for (bool halving : {false, true}) {
    for (int size = 1; size <= 40; ++size) {
      CAPTURE(halving);
      CAPTURE(size);
      Simulation sim(size, halving);
      sim.run();
      for (int r = 0; r < size; ++r) {
        CAPTURE(r);
        REQUIRE(sim.next[r] == sim.plans[r].count);  // nobody stuck waiting
        CHECK(sim.value[r] == sim.value[0]);         // the same expressions everywhere
        for (const std::string& block : sim.value[r]) {
          for (int k = 0; k < size; ++k) CHECK(count_of(block, term(k)) == 1);
        }
      }
      for (const auto& [key, q] : sim.wire) CHECK(q.empty());  // every message read
    }
  }
}

TEST_CASE("p2p all_reduce plan: halving sends each block once a round, half as much each round") {
  // 4 ranks: rank 1 (virtual 1) keeps the lower half, then block 1; then swaps block 1 for 0 and
  // blocks 0-1 for 2-3.
  const P2pPlan p = p2p_allreduce_plan(1, 4, true);
  REQUIRE(p.count == 4);
  CHECK(p.blocks == 4);
  CHECK(p.steps[0] == P2pStep{Kind::kExchange, 3, 1, false, {2, 4}, {0, 2}});
  CHECK(p.steps[1] == P2pStep{Kind::kExchange, 0, 2, true, {0, 1}, {1, 2}});
  CHECK(p.steps[2] == P2pStep{Kind::kSwap, 0, 3, false, {1, 2}, {0, 1}});
  CHECK(p.steps[3] == P2pStep{Kind::kSwap, 3, 4, false, {0, 2}, {2, 4}});
  // 2 ranks: one exchange of halves, one swap.
  const P2pPlan two = p2p_allreduce_plan(0, 2, true);
  REQUIRE(two.count == 2);
  CHECK(two.steps[0] == P2pStep{Kind::kExchange, 1, 1, false, {1, 2}, {0, 1}});
  CHECK(two.steps[1] == P2pStep{Kind::kSwap, 1, 2, false, {0, 1}, {1, 2}});
  // Past 2^15 ranks the rounds would not fit the op's tags: doubling instead.
  CHECK(ddp::comm::mpi_backend::p2p_halving_fits(1 << 15));
  CHECK_FALSE(ddp::comm::mpi_backend::p2p_halving_fits(1 << 16));
  CHECK_FALSE(ddp::comm::mpi_backend::p2p_halving_fits(1));
  const P2pPlan big = p2p_allreduce_plan(1, (1 << 16) + 1, true);
  CHECK(big.steps[1].kind == Kind::kExchange);
  CHECK(big.steps[1].send.whole());
}

TEST_CASE("p2p all_reduce plan: the rounds and tags of a small case, and the bounds") {
  // 3 ranks: rank 0 folds into rank 1, which exchanges with rank 2 and hands the result back.
  P2pPlan p0 = p2p_allreduce_plan(0, 3), p1 = p2p_allreduce_plan(1, 3), p2 = p2p_allreduce_plan(2, 3);
  REQUIRE(p0.count == 2);
  CHECK(p0.steps[0] == P2pStep{Kind::kSend, 1, 0, false, {}, {}});
  CHECK(p0.steps[1] ==
        P2pStep{Kind::kRecvResult, 1, ddp::comm::mpi_backend::kP2pTagsPerOp - 1, false, {}, {}});
  REQUIRE(p1.count == 3);
  CHECK(p1.steps[0] == P2pStep{Kind::kRecvCombine, 0, 0, true, {}, {}});
  CHECK(p1.steps[1] == P2pStep{Kind::kExchange, 2, 1, false, {}, {}});
  REQUIRE(p2.count == 1);
  CHECK(p2.steps[0] == P2pStep{Kind::kExchange, 1, 1, true, {}, {}});
  CHECK(p2p_allreduce_plan(0, 1).count == 0);
  // The largest group an int rank allows still fits the tag range.
  const P2pPlan big = p2p_allreduce_plan(1, (1 << 30) + 3);
  CHECK(big.count == 32);
  CHECK(big.steps[31].tag == ddp::comm::mpi_backend::kP2pTagsPerOp - 1);
}
