// ddp-launch --status, black-box: two launchers of a `sleep` worker on loopback, then --status
// with the same rendezvous flags prints the round, both nodes alive with their ranks, as text and
// as JSON (parsed by /usr/bin/python3); a store that is not there, or holds no such job, is a
// clear error naming the endpoint. The same on etcd where /usr/bin/etcd exists (its own ctest,
// Skipped otherwise).
#include <doctest/doctest.h>

#include "cli/launch_test_util.h"
#include "rendezvous/etcd_cluster.h"

using namespace ddp::test;

namespace {

bool has(const std::string& text, const std::string& what) { return text.find(what) != std::string::npos; }

std::vector<std::string> with(std::vector<std::string> a, const std::vector<std::string>& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

// Two launchers of `sleep 120`, 2 workers each, stopped (SIGTERM) when destroyed.
class TwoLaunchers {
 public:
  TwoLaunchers(const ScratchDir& dir, const std::vector<std::string>& flags) {
    for (int i = 0; i < 2; ++i) {
      const std::string n = std::to_string(i);
      auto argv = with({launcher_path(), "--nproc-per-node", "2", "--shutdown-timeout", "2"}, flags);
      argv.insert(argv.end(), {"sleep", "120"});
      nodes_.push_back(std::make_unique<Child>(argv, std::map<std::string, std::string>{},
                                               dir / ("node" + n + ".out"), dir / ("node" + n + ".err")));
    }
  }
  ~TwoLaunchers() {
    for (auto& c : nodes_) ::kill(c->pid(), SIGTERM);
    for (auto& c : nodes_) c->wait(std::chrono::seconds(30));
  }
  TwoLaunchers(const TwoLaunchers&) = delete;
  TwoLaunchers& operator=(const TwoLaunchers&) = delete;

 private:
  std::vector<std::unique_ptr<Child>> nodes_;
};

// --status until both nodes show up alive (the launchers take a moment to meet).
Result status_when_both_alive(const ScratchDir& dir, const std::vector<std::string>& flags) {
  Result r;
  eventually(
      [&] {
        r = launch(dir, with({"--status"}, flags));
        return r.code == 0 && has(r.out, "round 0: 2 node(s), world size 4") &&
               r.out.find("alive") != r.out.rfind("alive");
      },
      std::chrono::seconds(60));
  return r;
}

// The JSON form, checked by /usr/bin/python3: round 0, two alive nodes, ranks 0-1 and 2-3.
void check_json(const ScratchDir& dir, const std::vector<std::string>& flags) {
  const Result r = launch(dir, with({"--status", "--format", "json"}, flags));
  REQUIRE(r.code == 0);
  write_file(dir / "status.json", r.out);
  const std::string check =
      "import json,sys; j=json.load(open(sys.argv[1])); "
      "assert j['round']==0, j; assert j['world_size']==4, j; "
      "assert [n['liveness'] for n in j['nodes']]==['alive','alive'], j; "
      "assert sorted(tuple(n['ranks']) for n in j['nodes'])==[(0,1),(2,3)], j; "
      "assert j['outcome'] is None and j['waiting']==[], j";
  Child py({"/usr/bin/python3", "-c", check, dir / "status.json"}, {}, dir / "py.out", dir / "py.err");
  const int code = py.wait(std::chrono::seconds(30));
  CAPTURE(py.err());
  CHECK(code == 0);
}

}  // namespace

TEST_CASE("--status of a c10d job: both nodes alive with their ranks; JSON; unreachable and unknown jobs") {
  ScratchDir dir;
  const std::string endpoint = "127.0.0.1:" + std::to_string(free_port_pair());
  const std::string id = unique_id("status");
  const std::vector<std::string> flags = {"--nnodes",        "2",      "--rdzv-backend", "c10d",
                                          "--rdzv-endpoint", endpoint, "--rdzv-id",      id};
  TwoLaunchers job(dir, flags);
  const Result r = status_when_both_alive(dir, flags);
  CAPTURE(r.out);
  CAPTURE(r.err);
  REQUIRE(r.code == 0);
  CHECK(has(r.out, "job '" + id + "' (tcp: the rendezvous store at " + endpoint + ")"));
  CHECK(has(r.out, "running (no outcome yet)"));
  CHECK(has(r.out, " 0-1 "));
  CHECK(has(r.out, " 2-3 "));
  CHECK(has(r.out, "waiting to join: none"));
  check_json(dir, flags);

  const Result other =
      launch(dir, with({"--status"}, {"--nnodes", "2", "--rdzv-backend", "c10d", "--rdzv-endpoint", endpoint,
                                      "--rdzv-id", id + "-other"}));
  CHECK(other.code == 121);
  CHECK(has(other.err, "no job with --rdzv-id " + id + "-other at " + endpoint));

  const std::string nobody = "127.0.0.1:" + std::to_string(free_port_pair());
  const Result gone = launch(dir, {"--status", "--nnodes", "2", "--rdzv-backend", "c10d", "--rdzv-endpoint",
                                   nobody, "--rdzv-id", id});
  CHECK(gone.code == 121);
  CHECK(has(gone.err, nobody));
}

TEST_CASE("--status of a file job that does not exist, and of a single-node job") {
  ScratchDir dir;
  const Result none = launch(dir, {"--status", "--nnodes", "2", "--rdzv-backend", "file", "--rdzv-endpoint",
                                   dir.path(), "--rdzv-id", "nosuch"});
  CHECK(none.code == 121);
  CHECK(has(none.err, "no job with --rdzv-id nosuch at " + dir.path()));
  const Result one = launch(dir, {"--status", "--standalone"});
  CHECK(one.code == 2);
  CHECK(has(one.err, "single-node job"));
}

TEST_CASE("--status of an etcd job: both nodes alive, from their leases" *
          doctest::skip(!ddp::rdzv::testing::have_etcd())) {
  ddp::rdzv::testing::EtcdCluster etcd;
  ScratchDir dir;
  const std::string id = unique_id("status-etcd");
  const std::vector<std::string> flags = {
      "--nnodes", "2", "--rdzv-backend", "etcd", "--rdzv-endpoint", etcd.endpoint(0), "--rdzv-id", id};
  TwoLaunchers job(dir, flags);
  const Result r = status_when_both_alive(dir, flags);
  CAPTURE(r.out);
  CAPTURE(r.err);
  REQUIRE(r.code == 0);
  CHECK(has(r.out, "(etcd: "));
  CHECK(has(r.out, " 0-1 "));
  CHECK(has(r.out, " 2-3 "));
  check_json(dir, flags);
  const Result other =
      launch(dir, with({"--status"}, {"--nnodes", "2", "--rdzv-backend", "etcd", "--rdzv-endpoint",
                                      etcd.endpoint(0), "--rdzv-id", id + "-other"}));
  CHECK(other.code == 121);
  CHECK(has(other.err, "no job with --rdzv-id " + id + "-other at "));
}
