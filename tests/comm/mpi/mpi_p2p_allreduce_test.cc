// The point-to-point all_reduce's plan, run symbolically: every rank of groups of 1 to 40 ranks
// follows its plan against message queues (a send is delivered by (source, destination, tag));
// every rank must end with every rank's data combined exactly once, in the same order on
// every rank (the same expression: the same bits), and no message may be left unread. The real
// MPI runs are in mpi_process_group_test (under mpirun with 2 and 3 ranks).
#include "comm/mpi/mpi_p2p_allreduce.h"

#include <doctest/doctest.h>

#include <cctype>
#include <map>
#include <string>
#include <tuple>
#include <vector>

using ddp::comm::mpi_backend::p2p_allreduce_plan;
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

struct Simulation {
  std::vector<P2pPlan> plans;
  std::vector<int> next;           // each rank's current step
  std::vector<bool> sent;          // its send went out (posted with the step, as MPI_Isend is)
  std::vector<std::string> value;  // each rank's buffer, as an expression
  std::map<std::tuple<int, int, int>, std::vector<std::string>> wire;  // (from, to, tag) -> messages

  explicit Simulation(int size) {
    for (int r = 0; r < size; ++r) {
      plans.push_back(p2p_allreduce_plan(r, size));
      next.push_back(0);
      sent.push_back(false);
      value.push_back(term(r));
    }
  }

  // Runs rank r's current step if its message has arrived: whether it did.
  bool step(int r) {
    if (next[r] == plans[r].count) return false;
    const P2pStep& s = plans[r].steps[static_cast<size_t>(next[r])];
    bool moved = false;
    if ((s.kind == Kind::kSend || s.kind == Kind::kExchange) && !sent[r]) {
      wire[{r, s.peer, s.tag}].push_back(value[r]);
      sent[r] = moved = true;
    }
    std::string got;
    if (s.kind != Kind::kSend) {
      auto& q = wire[{s.peer, r, s.tag}];
      if (q.empty()) return moved;
      got = q.front();
      q.erase(q.begin());
    }
    if (s.kind == Kind::kRecvResult) value[r] = got;
    if (s.kind == Kind::kRecvCombine || s.kind == Kind::kExchange) {
      value[r] = s.peer_first ? sum(got, value[r]) : sum(value[r], got);
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
  for (int size = 1; size <= 40; ++size) {
    CAPTURE(size);
    Simulation sim(size);
    sim.run();
    for (int r = 0; r < size; ++r) {
      CAPTURE(r);
      REQUIRE(sim.next[r] == sim.plans[r].count);  // nobody stuck waiting
      CHECK(sim.value[r] == sim.value[0]);         // the same expression everywhere
      for (int k = 0; k < size; ++k) CHECK(count_of(sim.value[r], term(k)) == 1);
    }
    for (const auto& [key, q] : sim.wire) CHECK(q.empty());  // every message read
  }
}

TEST_CASE("p2p all_reduce plan: the rounds and tags of a small case, and the bounds") {
  // 3 ranks: rank 0 folds into rank 1, which exchanges with rank 2 and hands the result back.
  P2pPlan p0 = p2p_allreduce_plan(0, 3), p1 = p2p_allreduce_plan(1, 3), p2 = p2p_allreduce_plan(2, 3);
  REQUIRE(p0.count == 2);
  CHECK(p0.steps[0] == P2pStep{Kind::kSend, 1, 0, false});
  CHECK(p0.steps[1] == P2pStep{Kind::kRecvResult, 1, ddp::comm::mpi_backend::kP2pTagsPerOp - 1, false});
  REQUIRE(p1.count == 3);
  CHECK(p1.steps[0] == P2pStep{Kind::kRecvCombine, 0, 0, true});
  CHECK(p1.steps[1] == P2pStep{Kind::kExchange, 2, 1, false});
  REQUIRE(p2.count == 1);
  CHECK(p2.steps[0] == P2pStep{Kind::kExchange, 1, 1, true});
  CHECK(p2p_allreduce_plan(0, 1).count == 0);
  // The largest group an int rank allows still fits the tag range.
  const P2pPlan big = p2p_allreduce_plan(1, (1 << 30) + 3);
  CHECK(big.count == 32);
  CHECK(big.steps[31].tag == ddp::comm::mpi_backend::kP2pTagsPerOp - 1);
}
