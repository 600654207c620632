// Elastic rendezvous: threads as launchers over a HashStore. A round closes with MAX nodes at
// once, or with MIN after the last call; a node late for a closed round waits in the next, which
// closes only once the round before has an outcome; a closed job ends every wait.
#include "rendezvous/elastic_rendezvous.h"

#include <doctest/doctest.h>

#include <algorithm>
#include <future>
#include <set>

#include "common/error.h"
#include "rendezvous/counting_store.h"
#include "rendezvous/hash_store.h"
#include "rendezvous/job_keys.h"

using namespace ddp;
using namespace ddp::rdzv;

namespace {

NodeInfo node(const std::string& host, int nproc, int restarts = -1) {
  NodeInfo n{host, {"10.0.0." + host.substr(1)}, nproc, -1, "id-" + host, restarts, 0};
  return n;
}

ElasticRendezvousOptions opts(int min, int max, Millis last_call = Millis(100)) {
  ElasticRendezvousOptions o;
  o.run_id = "job";
  o.min_nodes = min;
  o.max_nodes = max;
  o.join_timeout = Millis(20'000);
  o.last_call_timeout = last_call;
  return o;
}

std::future<std::optional<NodeAssignment>> join(Store& store, const NodeInfo& n, ElasticRendezvousOptions o) {
  return std::async(std::launch::async, [&store, n, o] { return elastic_rendezvous(store, n, o); });
}

}  // namespace

TEST_CASE("MAX nodes close the round at once; ranks by arrival, contiguous global ranks, hosts and ids") {
  HashStore store;
  // A last call far longer than the test: only MAX arriving can close the round.
  auto o = opts(1, 3, Millis(600'000));
  auto f1 = join(store, node("h1", 2), o), f2 = join(store, node("h2", 1, 1), o),
       f3 = join(store, node("h3", 1), o);
  std::vector<NodeAssignment> a = {*f1.get(), *f2.get(), *f3.get()};
  std::set<int> ranks;
  for (const auto& x : a) {
    ranks.insert(x.node_rank);
    CHECK(x.nnodes == 3);
    CHECK(x.world_size == 4);
    CHECK(x.round == 0);
    CHECK(x.restart_count == 1);  // the most any node knew
    CHECK(x.id_by_node.size() == 3);
    CHECK(x.rank_offset == [&] {
      int off = 0;
      for (int r = 0; r < x.node_rank; ++r) off += x.nproc_by_node[r];
      return off;
    }());
  }
  CHECK(ranks == std::set<int>{0, 1, 2});
}

TEST_CASE("node 0's offered MASTER_PORT reaches every node of the round") {
  HashStore store;
  std::vector<NodeInfo> nodes = {node("h1", 1), node("h2", 1), node("h3", 1)};
  for (size_t i = 0; i < nodes.size(); ++i) nodes[i].master_port = 5000 + static_cast<int>(i);
  auto o = opts(1, 3, Millis(600'000));
  std::vector<std::future<std::optional<NodeAssignment>>> f;
  for (const auto& n : nodes) f.push_back(join(store, n, o));
  std::vector<NodeAssignment> a;
  for (auto& x : f) a.push_back(*x.get());
  const auto first =
      std::find_if(a.begin(), a.end(), [](const NodeAssignment& x) { return x.node_rank == 0; });
  REQUIRE(first != a.end());
  for (const auto& x : a) CHECK(x.offered_port == 5000 + (first - a.begin()));
}

TEST_CASE("each node reads the round's registrations in one batch, never one at a time") {
  constexpr int kNodes = 24;
  HashStore store;
  std::vector<std::unique_ptr<testing::CountingStore>> views;
  for (int i = 0; i < kNodes; ++i) views.push_back(std::make_unique<testing::CountingStore>(store));
  std::vector<std::future<std::optional<NodeAssignment>>> f;
  for (int i = 0; i < kNodes; ++i)
    f.push_back(join(*views[i], node("h" + std::to_string(i), 1), opts(1, kNodes, Millis(600'000))));
  for (auto& x : f) CHECK(x.get()->nnodes == kNodes);
  for (const auto& v : views) {
    CHECK(v->node_gets == 0);
    CHECK(v->node_reads == 1);
  }
}

TEST_CASE("MIN nodes close the round after the last call; a late node waits in the next round") {
  HashStore store;
  auto o = opts(2, 3, Millis(1000));  // long enough for the second thread of a pair to arrive
  auto f1 = join(store, node("h1", 1), o), f2 = join(store, node("h2", 1), o);
  auto a1 = *f1.get(), a2 = *f2.get();
  CHECK(a1.nnodes == 2);
  CHECK(a1.round == 0);
  CHECK(a1.node_rank + a2.node_rank == 1);
  // A third node comes while round 0 runs: it waits in round 1, which cannot close yet.
  auto late = join(store, node("h3", 1), o);
  CHECK(late.wait_for(std::chrono::milliseconds(300)) == std::future_status::timeout);
  CHECK(waiting_in_round(store, "job", 1) == 1);
  // Round 0 ends (launcher/node_round.h writes its outcome); its nodes come to round 1 too.
  store.set("job/round/0/outcome", "changed: a node waits");
  o.round = 1;
  auto f4 = join(store, node("h1", 1), o), f5 = join(store, node("h2", 1), o);
  auto b3 = *late.get(), b4 = *f4.get(), b5 = *f5.get();
  CHECK(b3.round == 1);
  CHECK(b3.nnodes == 3);
  CHECK(b4.nnodes == 3);
  CHECK(b3.node_rank == 0);  // it came first
}

TEST_CASE("a closed job ends the wait; no round closing in time is a TimeoutError naming MIN") {
  HashStore store;
  auto o = opts(2, 2);
  auto f = join(store, node("h1", 1), o);
  store.set(JobKeys("job").closed(), "done");
  CHECK_FALSE(f.get().has_value());

  HashStore other;
  o.join_timeout = Millis(300);
  CHECK_THROWS_WITH_AS(elastic_rendezvous(other, node("h1", 1), o), doctest::Contains("at least 2"),
                       TimeoutError);
  o.min_nodes = 3;
  CHECK_THROWS_AS(elastic_rendezvous(other, node("h1", 1), o), InvalidArgument);
}
