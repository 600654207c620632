// The agent's loop over rounds, black-box: ddp-launch processes on loopback as nodes, with short
// heartbeats (keep_alive 0.25 s x 8 = 2 s) and last calls, so each case takes a few seconds.
//   - static --nnodes 2: a launcher SIGKILLed is named by the other within the heartbeat bound
//     (asserted with a stated slack), also when it was the store host; no worker survives;
//   - --nnodes 1:2: a node that starts mid-run joins the next round (WORLD_SIZE 1, then 2);
//   - --nnodes 2:3: one of three launchers SIGKILLed, named within the bound; the two left run a
//     new round and finish;
//   - --nnodes 2:3 with two nodes: one lost leaves fewer than MIN: exit 122 naming it, within the
//     bound.
// Workers are sh scripts that log their environment and wait for the test's go-ahead file.
#include <doctest/doctest.h>

#include <chrono>
#include <csignal>
#include <functional>
#include <map>
#include <memory>
#include <sstream>

#include "cli/launch_test_util.h"

using namespace ddp::test;

namespace {

using Clock = std::chrono::steady_clock;
using Millis = std::chrono::milliseconds;

// A 2 s bound: a live launcher is lost only after about that long unscheduled, which a loaded
// 2-core machine (ctest -j, sanitizer builds beside) does not reach, where 1 s could be.
constexpr const char* kHeartbeat = "keep_alive_interval=0.25,keep_alive_max_attempt=8";
constexpr Millis kInterval{250};
constexpr Millis kBound = kInterval * 8;
// A loss is named within the bound plus one interval (launcher/heartbeat.h: the checker by the
// bound of the last beat, the others one interval later; a store no longer answering, by the
// bound of its last answer plus one tick), plus this slack for the same machine's late wake-ups
// (the launchers' threads, this test's 10 ms poll of the log). A regression of the bound by more
// than the slack fails.
constexpr Millis kSlack{2'000};
constexpr Millis kDetected = kBound + kInterval + kSlack;

struct Node {
  std::unique_ptr<Child> child;
  std::string err_path;
  std::string err() const { return slurp(err_path); }
};

Node start(const ScratchDir& d, const std::string& name, const std::vector<std::string>& args,
           const std::map<std::string, std::string>& env = {}) {
  std::vector<std::string> argv = {launcher_path()};
  argv.insert(argv.end(), args.begin(), args.end());
  Node n;
  n.err_path = d / (name + ".err");
  n.child = std::make_unique<Child>(argv, env, d / (name + ".out"), n.err_path);
  return n;
}

// The debug log's "round loop: <from> -> <to>" lines, in order.
std::vector<std::string> transitions(const std::string& log) {
  std::vector<std::string> out;
  std::istringstream in(log);
  const std::string mark = "round loop: ";
  for (std::string line; std::getline(in, line);) {
    const auto at = line.find(mark);
    if (at != std::string::npos) out.push_back(line.substr(at + mark.size()));
  }
  return out;
}

// A tcp rendezvous on loopback, elastic or not.
std::vector<std::string> tcp_flags(const std::string& nnodes, int port, const std::string& id,
                                   const std::string& conf) {
  return {"--nnodes",           nnodes,
          "--rdzv-backend",     "c10d",
          "--rdzv-endpoint",    "127.0.0.1:" + std::to_string(port),
          "--rdzv-id",          id,
          "--rdzv-conf",        std::string(kHeartbeat) + (conf.empty() ? "" : "," + conf),
          "--shutdown-timeout", "2",
          "--monitor-interval", "0.1"};
}

// Each worker appends "<GROUP_WORLD_SIZE> <GROUP_RANK> <RANK> <WORLD_SIZE> <restart count> <pid>" to
// d/log, then: exits 0 once d/go exists and its world has `finish_at` nodes; exits 3 once d/fail
// exists and its world has more (as a collective fails when a peer is lost); else sleeps (to be
// stopped by a new round, or killed with its launcher).
std::vector<std::string> worker(const ScratchDir& d, int finish_at) {
  const std::string log = d / "log", go = d / "go", fail = d / "fail", n = std::to_string(finish_at);
  return {"sh", "-c",
          "echo $GROUP_WORLD_SIZE $GROUP_RANK $RANK $WORLD_SIZE $TORCHELASTIC_RESTART_COUNT $$ >> " + log +
              "; while true; do if [ -e " + go + " ] && [ $GROUP_WORLD_SIZE = " + n +
              " ]; then exit 0; fi; " + "if [ -e " + fail + " ] && [ $GROUP_WORLD_SIZE -gt " + n +
              " ]; then exit 3; fi; sleep 0.05; done"};
}

// Lines of d/log whose first field (the node count) is `nodes`.
int lines_with_nodes(const ScratchDir& d, int nodes) {
  std::istringstream in(slurp(d / "log"));
  std::string line;
  int n = 0;
  while (std::getline(in, line)) {
    if (line.rfind(std::to_string(nodes) + " ", 0) == 0) ++n;
  }
  return n;
}

bool has(const std::string& text, const std::string& what) { return text.find(what) != std::string::npos; }

// Waits until `log()` holds `what` and checks it came within kDetected of `since`.
void check_named_within(const std::function<std::string()>& log, const std::string& what,
                        Clock::time_point since) {
  REQUIRE(eventually([&] { return has(log(), what); }));
  const auto took = std::chrono::duration_cast<Millis>(Clock::now() - since);
  CAPTURE(what);
  CHECK(took <= kDetected);
}

}  // namespace

TEST_CASE("static --nnodes 2: the other launcher SIGKILLed is named within the heartbeat bound") {
  for (int killed : {1, 0}) {  // node 1; then node 0, which hosts the store
    CAPTURE(killed);
    ScratchDir d;
    const int port = free_port_pair();
    const std::string id = unique_id("hb-static");
    auto args = [&](int rank) {
      std::vector<std::string> a = {"--nnodes",           "2",         "--node-rank",   std::to_string(rank),
                                    "--master-addr",      "127.0.0.1", "--master-port", std::to_string(port),
                                    "--rdzv-id",          id,          "--rdzv-conf",   kHeartbeat,
                                    "--shutdown-timeout", "2"};
      auto w = worker(d, 99);
      a.insert(a.end(), w.begin(), w.end());
      return a;
    };
    Node n0 = start(d, "node0", args(0));
    Node n1 = start(d, "node1", args(1));
    REQUIRE(eventually([&] { return lines_with_nodes(d, 2) == 2; }));
    Node& victim = killed == 0 ? n0 : n1;
    Node& survivor = killed == 0 ? n1 : n0;
    ::kill(victim.child->pid(), SIGKILL);
    const auto at = Clock::now();
    const std::string named =
        killed == 1 ? "no heartbeat" : "rendezvous store at 127.0.0.1:" + std::to_string(port + 1);
    check_named_within([&] { return survivor.err(); }, named, at);
    const int code = survivor.child->wait(std::chrono::seconds(60));
    const std::string err = survivor.err();
    CAPTURE(err);
    CHECK(code == 122);
    if (killed == 1) {
      CHECK(has(err, "node 1 ("));
      CHECK(has(err, "no heartbeat"));
    } else {
      CHECK(has(err, "rendezvous store at 127.0.0.1:" + std::to_string(port + 1)));
    }
    CHECK(
        eventually([&] { return processes_with_env("DDP_RUN_ID=" + id).empty(); }, std::chrono::seconds(10)));
  }
}

TEST_CASE("--nnodes 1:2: a node that starts mid-run joins the next round") {
  ScratchDir d;
  const int port = free_port_pair();
  const std::string id = unique_id("scale-up");
  auto args = tcp_flags("1:2", port, id, "last_call_timeout=0.3");
  auto w = worker(d, 2);
  args.insert(args.end(), w.begin(), w.end());
  write_file(d / "go", "");
  Node a = start(d, "a", args, {{"DDP_LOG_LEVEL", "debug"}});
  REQUIRE(eventually([&] { return lines_with_nodes(d, 1) == 1; }));
  Node b = start(d, "b", args);
  const int code_a = a.child->wait(std::chrono::seconds(60));
  const int code_b = b.child->wait(std::chrono::seconds(60));
  CAPTURE(a.err());
  CAPTURE(b.err());
  CHECK(code_a == 0);
  CHECK(code_b == 0);
  CHECK(lines_with_nodes(d, 1) == 1);          // round 0: node a alone, WORLD_SIZE 1
  CHECK(lines_with_nodes(d, 2) == 2);          // round 1: both
  CHECK(has(slurp(d / "log"), "2 0 0 2 0 "));  // GROUP_RANK 0 RANK 0 WORLD_SIZE 2, no restart counted
  CHECK(has(slurp(d / "log"), "2 1 1 2 0 "));
  CHECK(has(a.err(), "waiting to join"));
  // Node a's round loop: its workers stopped for the new member, never counted as a restart.
  CHECK(transitions(a.err()) == std::vector<std::string>{"Rendezvous -> Running", "Running -> Stopping",
                                                         "Stopping -> Deciding", "Deciding -> Rendezvous",
                                                         "Rendezvous -> Running", "Running -> ExitBarrier",
                                                         "ExitBarrier -> Deciding", "Deciding -> Done"});
}

TEST_CASE("one node: a failure with a restart left runs a new round, then the last failure ends the job") {
  ScratchDir d;
  Node a = start(d, "a", {"--nnodes", "1", "--max-restarts", "1", "sh", "-c", "exit 3"},
                 {{"DDP_LOG_LEVEL", "debug"}});
  CHECK(a.child->wait(std::chrono::seconds(60)) == 3);
  CAPTURE(a.err());
  CHECK(transitions(a.err()) == std::vector<std::string>{"Rendezvous -> Running", "Running -> Deciding",
                                                         "Deciding -> Rendezvous", "Rendezvous -> Running",
                                                         "Running -> Deciding", "Deciding -> Done"});
}

TEST_CASE(
    "--nnodes 2:3: one of three launchers SIGKILLed, the two left finish in a new round, no restart spent") {
  ScratchDir d;
  const int port = free_port_pair();
  const std::string id = unique_id("scale-down");
  auto args = tcp_flags("2:3", port, id, "last_call_timeout=0.3");
  auto w = worker(d, 2);
  args.insert(args.end(), w.begin(), w.end());
  std::vector<Node> nodes;
  for (const char* name : {"a", "b", "c"}) nodes.push_back(start(d, name, args));
  // Until the go-ahead, a round of two (the third came late) waits for the third to join.
  REQUIRE(eventually([&] { return lines_with_nodes(d, 3) == 3; }));
  write_file(d / "go", "");
  // Not the store host (with tcp the store's launcher is a single point of failure).
  size_t victim = 0;
  while (has(nodes[victim].err(), "hosting the rendezvous store")) ++victim;
  ::kill(nodes[victim].child->pid(), SIGKILL);
  const auto at = Clock::now();
  // The survivors' workers fail too (as a collective would), with --max-restarts 0: the lost
  // node, not the failure, must decide the round.
  write_file(d / "fail", "");
  for (size_t i = 0; i < nodes.size(); ++i) {
    if (i != victim) check_named_within([&] { return nodes[i].err(); }, "lost: no heartbeat", at);
  }
  std::string errs;
  for (size_t i = 0; i < nodes.size(); ++i) {
    if (i == victim) continue;
    CHECK(nodes[i].child->wait(std::chrono::seconds(60)) == 0);
    errs += nodes[i].err();
  }
  CAPTURE(errs);
  CHECK(lines_with_nodes(d, 2) >= 2);
  CHECK(has(errs, "lost: no heartbeat"));
  CHECK(has(errs, "a new round with the 2 node(s) left"));
  CHECK(has(slurp(d / "log"), "2 0 0 2 0 "));  // TORCHELASTIC_RESTART_COUNT still 0
  CHECK(processes_with_env("DDP_RUN_ID=" + id).empty());
}

TEST_CASE("--nnodes 2:3 with two nodes: one lost leaves fewer than MIN, exit 122 naming it") {
  ScratchDir d;
  const int port = free_port_pair();
  const std::string id = unique_id("below-min");
  auto args = tcp_flags("2:3", port, id, "last_call_timeout=0.3");
  auto w = worker(d, 99);
  args.insert(args.end(), w.begin(), w.end());
  Node a = start(d, "a", args);
  Node b = start(d, "b", args);
  REQUIRE(eventually([&] { return lines_with_nodes(d, 2) == 2; }));
  // The node that does not host the store (it binds the endpoint: the first one up, usually a).
  const bool a_hosts = has(a.err(), "hosting the rendezvous store");
  Node& victim = a_hosts ? b : a;
  Node& survivor = a_hosts ? a : b;
  ::kill(victim.child->pid(), SIGKILL);
  const auto at = Clock::now();
  check_named_within([&] { return survivor.err(); }, "lost: no heartbeat", at);
  const int code = survivor.child->wait(std::chrono::seconds(60));
  const std::string err = survivor.err();
  CAPTURE(err);
  CHECK(code == 122);
  CHECK(has(err, "lost: no heartbeat"));
  CHECK(has(err, "fewer than the minimum of 2"));
  CHECK(eventually([&] { return processes_with_env("DDP_RUN_ID=" + id).empty(); }, std::chrono::seconds(10)));
}
