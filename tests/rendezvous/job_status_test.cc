// JobStatus: a HashStore filled by real rendezvous rounds (threads as launchers), then read
// through a view that fails on any write: rounds, nodes and ranks, outcome, the nodes waiting in
// the next round, a static round, a job that does not exist, an ended job.
#include "rendezvous/job_status.h"

#include <doctest/doctest.h>

#include <atomic>
#include <future>

#include "common/error.h"
#include "rendezvous/elastic_rendezvous.h"
#include "rendezvous/hash_store.h"
#include "rendezvous/job_keys.h"
#include "rendezvous/read_only_store.h"

using namespace ddp;
using namespace ddp::rdzv;

namespace {

NodeInfo node(const std::string& host, int nproc) {
  return NodeInfo{host, {"127.0.0.1"}, nproc, -1, "id-" + host, -1, 0};
}

ElasticRendezvousOptions elastic(int min, int max) {
  ElasticRendezvousOptions o;
  o.run_id = "job";
  o.min_nodes = min;
  o.max_nodes = max;
  o.join_timeout = Millis(20'000);
  o.last_call_timeout = Millis(100);
  return o;
}

std::optional<JobStatus> read(Store& store, bool is_elastic = true, int nnodes = 3) {
  testing::ReadOnlyStore view(store);
  auto j = read_job_status(view, JobStatusOptions{.run_id = "job", .elastic = is_elastic, .nnodes = nnodes});
  CHECK(view.writes() == 0);
  return j;
}

// Three launchers (nproc 1, 2, 3) in one elastic round of 2 to 3 nodes.
void three_in_round_zero(Store& store) {
  std::vector<std::future<std::optional<NodeAssignment>>> f;
  for (int i = 0; i < 3; ++i) {
    f.push_back(std::async(std::launch::async, [&store, i] {
      return elastic_rendezvous(store, node("h" + std::to_string(i), i + 1), elastic(2, 3));
    }));
  }
  for (auto& x : f) REQUIRE(x.get().has_value());
}

}  // namespace

TEST_CASE("a round of three launchers: its nodes, hosts, ids and global ranks; no outcome yet") {
  HashStore store;
  three_in_round_zero(store);
  const auto j = read(store);
  REQUIRE(j.has_value());
  CHECK(j->round == 0);
  CHECK(j->world_size == 6);
  REQUIRE(j->nodes.size() == 3);
  int offset = 0;
  for (size_t r = 0; r < 3; ++r) {
    const auto& n = j->nodes[r];
    CAPTURE(r);
    CHECK(n.node_rank == static_cast<int>(r));
    CHECK(n.id == "id-" + n.host);
    CHECK(n.rank_offset == offset);
    CHECK(n.liveness == NodeLiveness::kUnknown);  // the launcher's probes fill it in
    offset += n.nproc;
  }
  CHECK_FALSE(j->outcome.has_value());
  CHECK(j->forming_round == -1);
  CHECK(j->waiting.empty());
  CHECK_FALSE(j->ended.has_value());
  // The launchers poll the next round's count (waiting_in_round), which creates it at 0.
  CHECK(waiting_in_round(store, "job", 1) == 0);
  CHECK(read(store)->forming_round == -1);
}

TEST_CASE("the round's outcome, and a node waiting in the next round while the round runs") {
  HashStore store;
  std::vector<std::future<std::optional<NodeAssignment>>> f;
  for (int i = 0; i < 2; ++i) {
    f.push_back(std::async(std::launch::async, [&store, i] {
      return elastic_rendezvous(store, node("h" + std::to_string(i), 2), elastic(2, 2));
    }));
  }
  for (auto& x : f) REQUIRE(x.get().has_value());
  // A third launcher comes late: round 0 is closed, so it waits in round 1 until round 0 ends.
  std::atomic<bool> stop{false};
  auto late = std::async(std::launch::async, [&] {
    ElasticRendezvousOptions o = elastic(2, 3);
    o.check_interrupt = [&] {
      if (stop) DDP_THROW(InvalidArgument, "stopped by the test");
    };
    try {
      elastic_rendezvous(store, node("late", 4), o);
    } catch (const InvalidArgument&) {
    }
  });
  auto waiting_one = [&] {
    auto j = read(store);
    return j && j->waiting.size() == 1;
  };
  for (int i = 0; i < 500 && !waiting_one(); ++i) std::this_thread::sleep_for(Millis(10));
  auto j = read(store);
  REQUIRE(j.has_value());
  CHECK(j->round == 0);
  CHECK(j->nodes.size() == 2);
  CHECK(j->forming_round == 1);
  REQUIRE(j->waiting.size() == 1);
  CHECK(j->waiting[0].host == "late");
  CHECK(j->waiting[0].nproc == 4);
  stop = true;
  late.get();

  store.set(RoundKeys("job", 0).outcome(), "changed: host late is waiting to join");
  j = read(store);
  REQUIRE(j->outcome.has_value());
  CHECK(*j->outcome == "changed: host late is waiting to join");
}

TEST_CASE("a static round: formed once every node of --nnodes registered") {
  HashStore store;
  std::vector<std::future<NodeAssignment>> f;
  for (int i = 0; i < 2; ++i) {
    f.push_back(std::async(std::launch::async, [&store, i] {
      NodeRendezvousOptions o;
      o.nnodes = 2;
      o.run_id = "job";
      o.timeout = Millis(20'000);
      return node_rendezvous(store, node("s" + std::to_string(i), 3), o);
    }));
  }
  for (auto& x : f) x.get();
  const auto j = read(store, false, 2);
  REQUIRE(j.has_value());
  CHECK(j->round == 0);
  CHECK(j->world_size == 6);
  REQUIRE(j->nodes.size() == 2);
  CHECK(j->nodes[1].rank_offset == 3);
  CHECK(j->forming_round == -1);
}

TEST_CASE("a job that does not exist reads as none; another job's keys are not its") {
  HashStore store;
  CHECK_FALSE(read(store).has_value());
  three_in_round_zero(store);
  testing::ReadOnlyStore view(store);
  CHECK_FALSE(read_job_status(view, JobStatusOptions{.run_id = "other", .elastic = true}).has_value());
}

TEST_CASE("an ended job says why") {
  HashStore store;
  three_in_round_zero(store);
  store.set(RoundKeys("job", 0).outcome(), "done");
  store.set(JobKeys("job").closed(), "every node's workers succeeded");
  const auto j = read(store);
  REQUIRE(j.has_value());
  CHECK(j->ended == std::optional<std::string>("every node's workers succeeded"));
  CHECK(j->outcome == std::optional<std::string>("done"));
}
