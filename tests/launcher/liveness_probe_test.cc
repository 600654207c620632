// The liveness probes of ddp-launch --status over real StoreHeartbeats (threads as launchers,
// a HashStore as the job's store), read through a view that fails on any write: beating nodes
// are alive, a node the round's checker found lost is lost, a node without a counter unknown.
#include "launcher/liveness_probe.h"

#include <doctest/doctest.h>

#include <chrono>
#include <thread>

#include "launcher/heartbeat.h"
#include "rendezvous/hash_store.h"
#include "rendezvous/read_only_store.h"

using namespace ddp;
using namespace ddp::launcher;

namespace {

constexpr Millis kInterval{50};
constexpr int kMaxAttempt = 3;

// Another handle on the same store, for a heartbeat's own connection.
class Handle final : public rdzv::Store {
 public:
  explicit Handle(rdzv::Store& base) : b_(base) {}

 protected:
  void do_set(const std::string& k, const rdzv::Bytes& v) override { b_.set(k, v); }
  rdzv::Bytes do_get(const std::string& k, Millis t) override { return b_.get(k, t); }
  int64_t do_add(const std::string& k, int64_t d) override { return b_.add(k, d); }
  rdzv::Bytes do_compare_set(const std::string& k, const rdzv::Bytes& e, const rdzv::Bytes& d) override {
    return b_.compare_set(k, e, d);
  }
  bool do_check(const std::vector<std::string>& k) override { return b_.check(k); }
  void do_wait(const std::vector<std::string>& k, Millis t) override { b_.wait(k, t); }
  bool do_delete_key(const std::string& k) override { return b_.delete_key(k); }
  int64_t do_num_keys() override { return b_.num_keys(); }

 private:
  rdzv::Store& b_;
};

std::unique_ptr<StoreHeartbeat> beat(rdzv::Store& store, const std::string& id) {
  StoreHeartbeatOptions o;
  o.run_id = "job";
  o.id = id;
  o.interval = kInterval;
  o.max_attempt = kMaxAttempt;
  o.open_store = [&store] { return std::make_unique<Handle>(store); };
  return std::make_unique<StoreHeartbeat>(std::move(o));
}

rdzv::NodeStatus node(int rank, const std::string& id) {
  rdzv::NodeStatus n;
  n.node_rank = rank;
  n.host = std::string(1, 'h').append(std::to_string(rank));  // not "h" + (GCC 12 -Wrestrict)
  n.id = id;
  return n;
}

}  // namespace

TEST_CASE("beating nodes are alive; a node found lost by the round's checker is lost; no counter: unknown") {
  rdzv::HashStore store;
  auto a = beat(store, "a"), b = beat(store, "b");
  LivenessRound round{0, 0, {{"a", "node 0 (h0)"}, {"b", "node 1 (h1)"}}};
  a->watch(round);
  round.node_rank = 1;
  b->watch(round);

  rdzv::JobStatus job;
  job.run_id = "job";
  job.round = 0;
  job.nodes = {node(0, "a"), node(1, "b")};
  job.waiting = {node(0, "never-beat")};
  const LivenessProbeOptions o{.run_id = "job", .interval = kInterval, .window = Millis(1000)};
  const auto probe_start = std::chrono::steady_clock::now();
  {
    rdzv::testing::ReadOnlyStore view(store);
    probe_heartbeats(view, o, job);
  }
  // The beat was seen during the probe: no longer ago than the probe ran (a loaded machine
  // may stretch the probe past its window, so the window itself is no bound here).
  const auto probe_took = std::chrono::steady_clock::now() - probe_start;
  CHECK(job.nodes[0].liveness == rdzv::NodeLiveness::kAlive);
  CHECK(job.nodes[1].liveness == rdzv::NodeLiveness::kAlive);
  REQUIRE(job.nodes[0].last_seen.has_value());
  CHECK(*job.nodes[0].last_seen <= probe_took);
  CHECK(job.waiting[0].liveness == rdzv::NodeLiveness::kUnknown);
  CHECK(job.waiting[0].liveness_detail == "no heartbeat counter");

  b.reset();  // node 1's launcher is gone: node 0, the checker, reports it lost
  for (int i = 0; i < 500 && a->lost().empty(); ++i) std::this_thread::sleep_for(Millis(10));
  REQUIRE(a->lost().size() == 1);
  job.nodes = {node(0, "a"), node(1, "b")};
  {
    rdzv::testing::ReadOnlyStore view(store);
    probe_heartbeats(view, o, job);
  }
  CHECK(job.nodes[0].liveness == rdzv::NodeLiveness::kAlive);
  CHECK(job.nodes[1].liveness == rdzv::NodeLiveness::kLost);
  CHECK_FALSE(job.nodes[1].last_seen.has_value());
}
