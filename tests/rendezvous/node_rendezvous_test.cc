// Node rendezvous: threads as launchers over a HashStore (and once over a real TCPStore).
#include "rendezvous/node_rendezvous.h"

#include <doctest/doctest.h>

#include <atomic>
#include <future>
#include <set>
#include <thread>

#include "common/error.h"
#include "rendezvous/counting_store.h"
#include "rendezvous/hash_store.h"
#include "rendezvous/job_keys.h"
#include "rendezvous/round_layout.h"
#include "rendezvous/tcp_store.h"
#include "store_fixtures.h"

using namespace ddp;
using namespace ddp::rdzv;
using ddp::rdzv::testing::CountingStore;
using namespace ddp::rdzv::testing;

namespace {

NodeInfo node(const std::string& host, int nproc, int requested = -1) {
  return NodeInfo{host, {"10.0.0." + host.substr(1)}, nproc, requested, "", -1, 0};
}

NodeRendezvousOptions opts(int nnodes, int round = 0, Millis timeout = Millis(20'000)) {
  NodeRendezvousOptions o;
  o.nnodes = nnodes;
  o.run_id = "job";
  o.round = round;
  o.timeout = timeout;
  return o;
}

// Runs one node per thread; returns the assignments in the order of `nodes`.
std::vector<NodeAssignment> meet(Store& store, const std::vector<NodeInfo>& nodes, NodeRendezvousOptions o) {
  std::vector<std::future<NodeAssignment>> f;
  for (const auto& n : nodes) {
    f.push_back(std::async(std::launch::async, [&store, n, o] { return node_rendezvous(store, n, o); }));
  }
  std::vector<NodeAssignment> out;
  for (auto& x : f) out.push_back(x.get());
  return out;
}

}  // namespace

TEST_CASE(
    "a round costs O(1) requests per node: only the last to register reads the registrations, in one batch") {
  constexpr int kNodes = 64;
  HashStore store;
  std::vector<std::unique_ptr<CountingStore>> views;
  for (int i = 0; i < kNodes; ++i) views.push_back(std::make_unique<CountingStore>(store));
  std::vector<std::future<NodeAssignment>> f;
  for (int i = 0; i < kNodes; ++i) {
    f.push_back(std::async(std::launch::async, [&, i] {
      return node_rendezvous(*views[i], node("h" + std::to_string(i), 1 + i % 3), opts(kNodes));
    }));
  }
  std::set<int> ranks;
  for (auto& x : f) {
    const NodeAssignment a = x.get();
    ranks.insert(a.node_rank);
    REQUIRE(a.host_by_node.size() == static_cast<size_t>(kNodes));
    CHECK(a.world_size == 22 * 1 + 21 * 2 + 21 * 3);  // nproc 1 + i % 3 for i < 64
  }
  CHECK(ranks.size() == static_cast<size_t>(kNodes));
  int node_gets = 0, node_reads = 0, readers = 0;
  for (const auto& v : views) {
    node_gets += v->node_gets;
    node_reads += v->node_reads;
    readers += v->node_reads > 0 ? 1 : 0;
    CHECK(v->others <= 5);  // shape (read; the first node's set), arrived, node/<rank>; the last: the layout
    CHECK(v->gets >= 1);    // the layout, got in slices: no wait before it
  }
  CHECK(node_gets == 0);  // never one registration at a time: a store reads a batch in few requests
  CHECK(node_reads == 1);
  CHECK(readers == 1);
}

TEST_CASE("a malformed layout is a StoreError naming its key") {
  for (const char* layout : {"[]", R"({"master_addr":"a","restarts":0,"nodes":[["h0","",1]]})",
                             R"({"master_addr":"a","restarts":0,"nodes":[["h0","",0],["h1","",1]]})",
                             R"({"failed":5})", R"({"failed":["why"]})", "{\"failed\":\""}) {
    CAPTURE(layout);
    HashStore s;
    // h0 arrives first of 2: it does not write the layout, it reads it
    s.set("job/round/0/layout", layout);
    CHECK_THROWS_WITH_AS(node_rendezvous(s, node("h0", 1), opts(2)), doctest::Contains("job/round/0/layout"),
                         StoreError);
  }
}

TEST_CASE("static ranks: layout with different nproc per node, contiguous global ranks") {
  HashStore store;
  auto a = meet(store, {node("h2", 3, 2), node("h0", 2, 0), node("h1", 1, 1)}, opts(3));
  CHECK(a[0].node_rank == 2);
  CHECK(a[1].node_rank == 0);
  CHECK(a[2].node_rank == 1);
  for (const auto& x : a) {
    CHECK(x.world_size == 6);
    CHECK(x.nnodes == 3);
    CHECK(x.nproc_by_node == std::vector<int>{2, 1, 3});
    CHECK(x.master_addr == "10.0.0.0");  // node 0's first address
  }
  CHECK(a[1].rank_offset == 0);
  CHECK(a[2].rank_offset == 2);
  CHECK(a[0].rank_offset == 3);
  CHECK(a[0].local_world_size == 3);
}

TEST_CASE("node 0's offered MASTER_PORT reaches every node in the layout; none offered: 0") {
  HashStore store;
  std::vector<NodeInfo> nodes = {node("h2", 1, 2), node("h0", 1, 0), node("h1", 1, 1)};
  for (size_t i = 0; i < nodes.size(); ++i) nodes[i].master_port = 4000 + static_cast<int>(i);
  for (const auto& x : meet(store, nodes, opts(3))) CHECK(x.offered_port == 4001);  // h0's
  HashStore dynamic;  // node 0 is whoever arrived first
  nodes = {node("h1", 1), node("h2", 1), node("h3", 1)};
  for (size_t i = 0; i < nodes.size(); ++i) nodes[i].master_port = 5000 + static_cast<int>(i);
  const std::vector<NodeAssignment> a = meet(dynamic, nodes, opts(3));
  for (size_t i = 0; i < a.size(); ++i)
    if (a[i].node_rank == 0)
      for (const auto& x : a) CHECK(x.offered_port == 5000 + static_cast<int>(i));
  HashStore none;  // launchers that offer none (earlier versions): the launcher reads its key
  for (const auto& x : meet(none, {node("h0", 1, 0), node("h1", 1, 1)}, opts(2))) CHECK(x.offered_port == 0);
}

TEST_CASE("dynamic ranks: every node gets a distinct rank by arrival") {
  HashStore store;
  auto a = meet(store, {node("h1", 2), node("h2", 2), node("h3", 2), node("h4", 2)}, opts(4));
  std::set<int> ranks, offsets;
  for (const auto& x : a) {
    ranks.insert(x.node_rank);
    offsets.insert(x.rank_offset);
    CHECK(x.world_size == 8);
  }
  CHECK(ranks == std::set<int>{0, 1, 2, 3});
  CHECK(offsets == std::set<int>{0, 2, 4, 6});
}

TEST_CASE("a node that never arrives: TimeoutError saying how many arrived") {
  HashStore store;
  auto o = opts(3, 0, Millis(300));
  std::string msg;
  try {
    meet(store, {node("h0", 1, 0), node("h1", 1, 1)}, o);
  } catch (const TimeoutError& e) {
    msg = e.message();
  }
  CHECK(msg.find("2 of 3 nodes arrived") != std::string::npos);
  CHECK(msg.find("missing node rank(s) 2") != std::string::npos);
  CHECK(msg.find("h0") != std::string::npos);
}

TEST_CASE("rounds are separate: a stale round does not leak into the next") {
  HashStore store;
  auto first = meet(store, {node("h0", 1, 0), node("h1", 1, 1)}, opts(2, 0));
  CHECK(first[0].round == 0);
  // Round 1 with different nproc: sees only round-1 registrations.
  auto second = meet(store, {node("h0", 4, 0), node("h1", 2, 1)}, opts(2, 1));
  CHECK(second[0].world_size == 6);
  CHECK(second[1].round == 1);
}

TEST_CASE("duplicate node rank is an error naming both hosts") {
  HashStore store;
  auto o = opts(2, 0, Millis(500));
  auto first = std::async(std::launch::async, [&] { return node_rendezvous(store, node("h0", 1, 0), o); });
  std::string msg;
  try {
    store.wait({"job/round/0/node/0"});
    node_rendezvous(store, node("h7", 1, 0), o);
  } catch (const InvalidArgument& e) {
    msg = e.message();
  }
  // The winner is told too (the round is marked failed), not left to wait out its timeout.
  try {
    first.get();
    FAIL("the winner was not told");
  } catch (const InvalidArgument& e) {
    CHECK(std::string(e.message()).find("claimed twice") != std::string::npos);
  }
  CHECK(msg.find("claimed twice") != std::string::npos);
  CHECK(msg.find("h0") != std::string::npos);
  CHECK(msg.find("h7") != std::string::npos);
}

TEST_CASE("nodes that disagree on nnodes, or mix static and dynamic ranks, are told so") {
  HashStore store;
  auto o2 = opts(2, 0, Millis(30'000));
  auto f = std::async(std::launch::async, [&] { return node_rendezvous(store, node("h1", 1, 1), o2); });
  // A timeout long enough that a TimeoutError cannot pass for the answer: h0 must be told.
  NodeRendezvousOptions o3 = opts(3, 0, Millis(30'000));
  // h0 with nnodes 3 registers as node 0; h1 sees its nnodes 3 and fails, and so must h0
  // (the round is marked failed), each with InvalidArgument naming the disagreement.
  try {
    node_rendezvous(store, node("h0", 1, 0), o3);
    FAIL("h0 was not told that the nodes disagree on nnodes");
  } catch (const InvalidArgument& e) {
    CHECK(std::string(e.message()).find("nnodes") != std::string::npos);
  }
  try {
    f.get();
    FAIL("h1 was not told that the nodes disagree on nnodes");
  } catch (const InvalidArgument& e) {
    CHECK(std::string(e.message()).find("nnodes") != std::string::npos);
  }

  // Static and dynamic mixed, in both orders of arrival: both nodes are told, naming the mix.
  for (bool static_first : {true, false}) {
    CAPTURE(static_first);
    HashStore store2;
    const auto o = opts(2, 0, Millis(30'000));
    auto first = std::async(std::launch::async, [&] {
      return node_rendezvous(store2, static_first ? node("h1", 1, 1) : node("h0", 1), o);
    });
    store2.wait({"job/round/0/arrived"});
    std::string second_msg, first_msg;
    try {
      node_rendezvous(store2, static_first ? node("h0", 1) : node("h1", 1, 1), o);
    } catch (const InvalidArgument& e) {
      second_msg = e.message();
    }
    try {
      first.get();
    } catch (const InvalidArgument& e) {
      first_msg = e.message();
    }
    CHECK(second_msg.find("give it on all nodes or on none") != std::string::npos);
    CHECK(first_msg.find("give it on all nodes or on none") != std::string::npos);
  }
}

TEST_CASE("more dynamic nodes than nnodes: the extra one is refused") {
  HashStore store;
  auto a = meet(store, {node("h1", 1), node("h2", 1)}, opts(2));
  CHECK(a.size() == 2);
  CHECK_THROWS_AS(node_rendezvous(store, node("h3", 1), opts(2)), InvalidArgument);
}

TEST_CASE("bad arguments") {
  HashStore store;
  CHECK_THROWS_AS(node_rendezvous(store, node("h0", 1, 2), opts(2)), InvalidArgument);
  CHECK_THROWS_AS(node_rendezvous(store, node("h0", 0, 0), opts(1)), InvalidArgument);
  CHECK_THROWS_AS(node_rendezvous(store, node("h0", 1), opts(0)), InvalidArgument);
}

TEST_CASE("check_interrupt can abort the wait") {
  HashStore store;
  auto o = opts(2, 0, Millis(60'000));
  int calls = 0;
  o.check_interrupt = [&] {
    if (++calls == 3) throw std::runtime_error("interrupted");
  };
  CHECK_THROWS_WITH(node_rendezvous(store, node("h0", 1, 0), o), "interrupted");
  CHECK(calls == 3);
}

TEST_CASE("while nodes are awaited, progress names who arrived and who is missing; none when all are there") {
  HashStore store;
  auto o = opts(3, 0, Millis(60'000));
  o.progress_interval = Millis(1);
  std::vector<NodeRendezvousProgress> seen;
  std::atomic<bool> done{false};
  o.on_progress = [&](const NodeRendezvousProgress& p) {
    seen.push_back(p);
    if (p.arrived.size() == 2) {
      done = true;
      throw std::runtime_error("enough");
    }
  };
  auto other = std::async(std::launch::async, [&] {
    auto q = opts(3, 0, Millis(60'000));
    q.check_interrupt = [&] {
      if (done) throw std::runtime_error("stop");
    };
    try {
      node_rendezvous(store, node("h2", 1, 2), q);
    } catch (const std::runtime_error&) {
    }
  });
  CHECK_THROWS_WITH(node_rendezvous(store, node("h0", 1, 0), o), "enough");
  other.get();
  REQUIRE(!seen.empty());
  CHECK(seen.front().arrived.front() == std::pair<int, std::string>{0, "h0"});
  const auto& p = seen.back();
  CHECK(p.run_id == "job");
  CHECK(p.nnodes == 3);
  CHECK(p.count == 2);
  CHECK(p.missing == std::vector<int>{1});
  CHECK(p.arrived == std::vector<std::pair<int, std::string>>{{0, "h0"}, {2, "h2"}});
  CHECK(p.timeout == Millis(60'000));

  HashStore quick;
  auto all = opts(2);
  int reports = 0;
  all.on_progress = [&](const NodeRendezvousProgress&) { ++reports; };
  meet(quick, {node("h0", 1, 0), node("h1", 1, 1)}, all);
  CHECK(reports == 0);
}

TEST_CASE("a waiting node of a large job reads one counter per report and never polls for failure") {
  HashStore store;
  CountingStore view(store);
  auto o = opts(100, 0, Millis(60'000));
  o.progress_interval = Millis(1);
  std::vector<NodeRendezvousProgress> seen;
  o.on_progress = [&](const NodeRendezvousProgress& p) {
    seen.push_back(p);
    if (seen.size() == 2) throw std::runtime_error("enough");
  };
  CHECK_THROWS_WITH(node_rendezvous(view, node("h0", 1), o), "enough");
  CHECK(view.node_reads == 0);  // no registration read: 100 waiters would read 100 each
  CHECK(view.node_gets == 0);
  CHECK(view.checks == 0);      // a broken round is the layout itself, which the one get watches
  CHECK(view.gets >= 1);        // the layout, got in slices
  CHECK(view.others == 4 + 2);  // shape (read, set), arrival, registration; a count per report
  const auto& p = seen.back();
  CHECK(p.count == 1);
  CHECK(p.arrived.empty());
  REQUIRE(p.missing.size() == 99);  // ranks by arrival: 1 to 99
  CHECK(p.missing.front() == 1);
  CHECK(p.missing.back() == 99);
}

TEST_CASE("the last node, awaiting a registration that never comes, learns that the round broke") {
  HashStore store;
  const auto o = opts(3, 0, Millis(30'000));  // far longer than the answer may take
  auto first = std::async(std::launch::async, [&] { return node_rendezvous(store, node("h0", 1, 0), o); });
  store.wait({"job/round/0/node/0"});
  // h7 claims node rank 0 too: it arrives second, fails the round and leaves node/1 unwritten.
  CHECK_THROWS_AS(node_rendezvous(store, node("h7", 1, 0), o), InvalidArgument);
  // h2 arrives last, so it waits for every registration, and must look at the round's outcome.
  CHECK_THROWS_WITH_AS(node_rendezvous(store, node("h2", 1, 2), o), doctest::Contains("claimed twice"),
                       InvalidArgument);
  CHECK_THROWS_WITH_AS(first.get(), doctest::Contains("claimed twice"), InvalidArgument);
}

// A node waiting for the layout (by get, in slices) reports progress, then learns that another
// node marked the round broken: on every store, whose get slices must behave as its wait's.
template <typename F>
void progress_then_broken() {
  F f;
  auto store = f.main();
  auto other = f.client();
  auto o = opts(2, 0, Millis(60'000));
  o.progress_interval = Millis(1);
  int reports = 0;
  o.on_progress = [&](const NodeRendezvousProgress& p) {
    CHECK(p.missing == std::vector<int>{1});
    if (++reports == 2)
      other->compare_set(RoundKeys("job", 0).layout(), {},
                         Store::to_bytes(encode_layout_failure("broken here")));
  };
  CHECK_THROWS_WITH_AS(node_rendezvous(*store, node("h0", 1, 0), o), doctest::Contains("broken here"),
                       InvalidArgument);
  CHECK(reports >= 2);
}

TEST_CASE_TEMPLATE("waiting for the layout: progress, then a broken round", F, HashFixture, FileFixture,
                   TcpFixture, Prefixed<TcpFixture>) {
  progress_then_broken<F>();
}

TEST_CASE("waiting for the layout: progress, then a broken round (etcd)" * doctest::skip(!have_etcd())) {
  progress_then_broken<EtcdFixture>();
}

TEST_CASE("over a real TCPStore: two clients and the server's own client") {
  TCPStoreOptions so;
  so.host = "127.0.0.1";
  so.is_server = true;
  so.job_token = "t0k";
  TCPStore server(so);
  TCPStoreOptions co = so;
  co.is_server = false;
  co.port = server.port();
  TCPStore c1(co), c2(co);
  std::vector<std::future<NodeAssignment>> f;
  f.push_back(
      std::async(std::launch::async, [&] { return node_rendezvous(server, node("h0", 2), opts(3)); }));
  f.push_back(std::async(std::launch::async, [&] { return node_rendezvous(c1, node("h1", 2), opts(3)); }));
  f.push_back(std::async(std::launch::async, [&] { return node_rendezvous(c2, node("h2", 2), opts(3)); }));
  std::set<int> ranks;
  for (auto& x : f) {
    auto a = x.get();
    ranks.insert(a.node_rank);
    CHECK(a.world_size == 6);
  }
  CHECK(ranks.size() == 3);
}

TEST_CASE("a malformed registration in the store is a StoreError naming its key, not a wrapped number") {
  // nproc 2^32+1 used to be read as int 1; 1e400 and a string were other shapes of the same.
  for (const char* nproc : {"4294967297", "1.5", "\"2\"", "1e400"}) {
    CAPTURE(nproc);
    HashStore s;
    s.set(
        "job/round/0/node/1",
        Store::to_bytes(
            std::string(
                R"({"host":"h1","addresses":["10.0.0.1"],"requested_rank":1,"nnodes":2,"nonce":"n","nproc":)") +
            nproc + "}"));
    s.add("job/round/0/arrived", 1);  // node 1 arrived and registered: h0, the last, reads both
    CHECK_THROWS_WITH_AS(node_rendezvous(s, node("h0", 1, 0), opts(2)),
                         doctest::Contains("registration under 'job/round/0/node/1'"), StoreError);
  }
}
