// The agent across nodes, black-box: two (or three) ddp-launch processes on loopback as nodes,
// static, tcp (dynamic ranks) and file rendezvous; failures stop every node; restarts happen on
// every node together; a node that never arrives; Ctrl-C during the rendezvous. Workers are sh
// scripts and ddp_store_probe (a real client of DDP_STORE with DDP_JOB_TOKEN).
#include <doctest/doctest.h>

#include <algorithm>
#include <chrono>
#include <csignal>
#include <memory>
#include <set>
#include <thread>

#include "cli/launch_test_util.h"
#include "common/socket.h"

using namespace ddp::test;

namespace {

std::string probe() { return bin_dir() + "/../tests/ddp_store_probe"; }

std::vector<std::string> with(std::vector<std::string> a, const std::vector<std::string>& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

// A rendezvous at 127.0.0.1:port through `backend` (tcp or its alias c10d), as flags.
struct Rendezvous {
  std::string backend = "tcp";
  int nnodes = 2;
  int nproc = 1;
  int port = 0;
  std::string id;
  std::vector<std::string> flags() const {
    return {"--nnodes",         std::to_string(nnodes),
            "--nproc-per-node", std::to_string(nproc),
            "--rdzv-backend",   backend,
            "--rdzv-endpoint",  "127.0.0.1:" + std::to_string(port),
            "--rdzv-id",        id};
  }
};

// Starts one launcher per entry of `args`; returns their exit codes.
std::vector<int> run_nodes(const ScratchDir& d, const std::vector<std::vector<std::string>>& args,
                           const std::map<std::string, std::string>& env = {}) {
  std::vector<std::unique_ptr<Child>> nodes;
  for (size_t i = 0; i < args.size(); ++i) {
    nodes.push_back(std::make_unique<Child>(with({launcher_path()}, args[i]), env,
                                            d / ("node" + std::to_string(i) + ".out"),
                                            d / ("node" + std::to_string(i) + ".err")));
  }
  // One deadline for every node, well inside ctest's 240 s: a launcher still running then is
  // killed (code -1) and its stderr printed, so a hang is a failure that says where.
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(100);
  std::vector<int> codes;
  for (size_t i = 0; i < nodes.size(); ++i) {
    const auto left =
        std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
    codes.push_back(nodes[i]->wait(std::max(left, std::chrono::milliseconds(1))));
    if (codes.back() == -1)
      MESSAGE("node ", i, " was still running after 100 s; its stderr:\n", nodes[i]->err());
  }
  return codes;
}

std::string dump_env(const ScratchDir& d) { return "env > " + d.path() + "/env.$RANK && exec " + probe(); }

std::map<std::string, std::string> env_of(const ScratchDir& d, int rank) {
  return parse_env_dump(slurp(d / ("env." + std::to_string(rank))));
}

}  // namespace

TEST_CASE("static: two nodes with different nproc, contiguous ranks, one store, one token") {
  ScratchDir d;
  const int port = free_port_pair();
  const std::string id = unique_id("static");
  auto common = std::vector<std::string>{
      "--nnodes",  "2", "--master-addr", "127.0.0.1", "--master-port", std::to_string(port),
      "--rdzv-id", id,  "--rdzv-conf",   "timeout=60"};
  auto codes =
      run_nodes(d, {with(common, {"--node-rank", "0", "--nproc-per-node", "2", "sh", "-c", dump_env(d)}),
                    with(common, {"--node-rank", "1", "--nproc-per-node", "1", "sh", "-c", dump_env(d)})});
  CHECK(codes == std::vector<int>{0, 0});
  std::set<std::string> tokens;
  for (int rank = 0; rank < 3; ++rank) {
    auto e = env_of(d, rank);
    CAPTURE(rank);
    CHECK(e["WORLD_SIZE"] == "3");
    CHECK(e["GROUP_RANK"] == (rank < 2 ? "0" : "1"));
    CHECK(e["DDP_NODE_RANK"] == (rank < 2 ? "0" : "1"));
    CHECK(e["LOCAL_RANK"] == (rank < 2 ? std::to_string(rank) : "0"));
    CHECK(e["LOCAL_WORLD_SIZE"] == (rank < 2 ? "2" : "1"));
    CHECK(e["GROUP_WORLD_SIZE"] == "2");
    CHECK(e["MASTER_ADDR"] == "127.0.0.1");
    CHECK(e["MASTER_PORT"] == std::to_string(port));
    CHECK(e["DDP_STORE"] == "127.0.0.1:" + std::to_string(port + 1));  // master_port + 1
    CHECK(e["DDP_RUN_ID"] == id);
    tokens.insert(e["DDP_JOB_TOKEN"]);
  }
  CHECK(tokens.size() == 1);
  // every worker reached DDP_STORE with the token and met the others there
  CHECK(slurp(d / "node1.out").find("all 3 ranks met") != std::string::npos);
  // The token came from the guessable id: each launcher says so, naming the fix.
  for (const char* err : {"node0.err", "node1.err"}) {
    CAPTURE(err);
    CHECK(slurp(d / err).find("DDP_JOB_TOKEN is not set") != std::string::npos);
  }
}

TEST_CASE("static: DDP_JOB_TOKEN given to every launcher is the job's token") {
  ScratchDir d;
  const int port = free_port_pair();
  auto common = std::vector<std::string>{
      "--nnodes", "2", "--master-addr", "127.0.0.1", "--master-port", std::to_string(port)};
  auto codes = run_nodes(d,
                         {with(common, {"--node-rank", "0", "sh", "-c", dump_env(d)}),
                          with(common, {"--node-rank", "1", "sh", "-c", dump_env(d)})},
                         {{"DDP_JOB_TOKEN", "0123456789abcdef0123456789abcdef"}});
  CHECK(codes == std::vector<int>{0, 0});
  CHECK(env_of(d, 1)["DDP_JOB_TOKEN"] == "0123456789abcdef0123456789abcdef");
  CHECK(slurp(d / "node0.err").find("DDP_JOB_TOKEN is not set") == std::string::npos);
}

TEST_CASE("tcp: ranks assigned at the rendezvous, the same command on every node") {
  ScratchDir d;
  const int port = free_port_pair();
  const std::string id = unique_id("tcp");
  auto args = with(Rendezvous{.backend = "c10d", .nnodes = 3, .port = port, .id = id}.flags(),
                   {"sh", "-c", dump_env(d)});
  auto codes = run_nodes(d, {args, args, args});
  CHECK(codes == std::vector<int>{0, 0, 0});
  std::set<std::string> node_ranks, stores, master_ports;
  for (int rank = 0; rank < 3; ++rank) {
    auto e = env_of(d, rank);
    CHECK(e["WORLD_SIZE"] == "3");
    node_ranks.insert(e["GROUP_RANK"]);
    stores.insert(e["DDP_STORE"]);
    master_ports.insert(e["MASTER_PORT"]);
    CHECK(e["MASTER_ADDR"] == "127.0.0.1");
  }
  CHECK(node_ranks == std::set<std::string>{"0", "1", "2"});
  CHECK(stores == std::set<std::string>{"127.0.0.1:" + std::to_string(port)});
  CHECK(master_ports.size() == 1);
  CHECK(*master_ports.begin() != std::to_string(port));
}

TEST_CASE("file: nodes meet in a shared directory; the token is shared through it") {
  ScratchDir d;
  const std::string id = unique_id("file");
  auto args = std::vector<std::string>{"--nnodes",
                                       "2",
                                       "--nproc-per-node",
                                       "2",
                                       "--rdzv-backend",
                                       "file",
                                       "--rdzv-endpoint",
                                       d / "rdzv",
                                       "--rdzv-id",
                                       id,
                                       "--local-addr",
                                       "127.0.0.1",
                                       "sh",
                                       "-c",
                                       dump_env(d)};
  auto codes = run_nodes(d, {args, args}, {{"DDP_JOB_TOKEN", ""}});
  CHECK(codes == std::vector<int>{0, 0});
  std::set<std::string> tokens, stores;
  for (int rank = 0; rank < 4; ++rank) {
    auto e = env_of(d, rank);
    tokens.insert(e["DDP_JOB_TOKEN"]);
    stores.insert(e["DDP_STORE"]);
  }
  CHECK(tokens.size() == 1);
  CHECK(tokens.begin()->size() == 32);
  CHECK(stores.size() == 1);
  CHECK(std::filesystem::exists(d / ("rdzv/" + id + ".store")));
  // the same id again finds the finished job's file and refuses it
  auto again = launch(d, args);
  CHECK(again.code == 121);
  CHECK(again.err.find("belongs to a finished job") != std::string::npos);
}

TEST_CASE("a failure on one node stops every node: its code there, 122 elsewhere, nothing survives") {
  ScratchDir d;
  const int port = free_port_pair();
  const std::string id = unique_id("fail");
  auto args =
      with(Rendezvous{.nproc = 2, .port = port, .id = id}.flags(),
           {"--shutdown-timeout", "5", "sh", "-c", "if [ $RANK = 3 ]; then exit 7; fi; exec sleep 300"});
  auto codes = run_nodes(d, {args, args});
  std::multiset<int> got(codes.begin(), codes.end());
  CHECK(got == std::multiset<int>{7, 122});
  CHECK(processes_with_env("DDP_RUN_ID=" + id).empty());
  std::string errs = slurp(d / "node0.err") + slurp(d / "node1.err");
  CHECK(errs.find("another node") != std::string::npos);
  CHECK(errs.find("exitcode  : 7") != std::string::npos);
}

TEST_CASE("tcp: the endpoint's port taken a moment by another program: a node hosts once it is free") {
  ScratchDir d;
  const int port = free_port_pair();
  const std::string id = unique_id("busy");
  // Something that is not a launcher listens there (and never answers) for the first 2 s: both
  // nodes fail to host and find no store; once it is gone, one of them must host.
  auto squatter = std::make_unique<ddp::Fd>(
      ddp::net::listen_tcp({.host = "127.0.0.1", .port = static_cast<uint16_t>(port), .backlog = 8}));
  std::jthread release([&] {
    std::this_thread::sleep_for(std::chrono::seconds(2));
    squatter.reset();
  });
  auto args = with(Rendezvous{.port = port, .id = id}.flags(), {"sh", "-c", "exit 0"});
  auto codes = run_nodes(d, {args, args});
  release.join();
  CHECK(codes == std::vector<int>{0, 0});
  std::string errs = slurp(d / "node0.err") + slurp(d / "node1.err");
  CHECK(errs.find("hosting the rendezvous store") != std::string::npos);
}

TEST_CASE("a node whose launcher dies after its workers finished: the others stop, naming it, not hang") {
  ScratchDir d;
  const int port = free_port_pair();
  auto common = std::vector<std::string>{
      "--nnodes",           "2",           "--master-addr", "127.0.0.1",          "--master-port",
      std::to_string(port), "--rdzv-conf", "timeout=10",    "--shutdown-timeout", "1"};
  // Node 1's worker SIGKILLs its own launcher, which so never reports at the exit barrier.
  auto codes = run_nodes(d, {with(common, {"--node-rank", "0", "true"}),
                             with(common, {"--node-rank", "1", "sh", "-c", "kill -KILL $PPID; exit 0"})});
  CHECK(codes[0] == 122);
  CHECK(codes[1] == 128 + SIGKILL);
  std::string err = slurp(d / "node0.err");
  CAPTURE(err);
  CHECK(err.find("node 1 (") != std::string::npos);  // named by its missing heartbeat
  CHECK(err.find("no heartbeat") != std::string::npos);
}

TEST_CASE("restarts happen on every node together") {
  ScratchDir d;
  const int port = free_port_pair();
  const std::string script = "echo $TORCHELASTIC_RESTART_COUNT >> " + d.path() +
                             "/attempts.$RANK; "
                             "if [ $RANK = 1 ] && [ $TORCHELASTIC_RESTART_COUNT = 0 ]; then exit 9; fi; "
                             "if [ $TORCHELASTIC_RESTART_COUNT = 0 ]; then exec sleep 300; fi; exec " +
                             probe();
  auto common = std::vector<std::string>{
      "--nnodes",       "2", "--master-addr",      "127.0.0.1", "--master-port", std::to_string(port),
      "--max-restarts", "1", "--shutdown-timeout", "5"};
  auto codes = run_nodes(d, {with(common, {"--node-rank", "0", "sh", "-c", script}),
                             with(common, {"--node-rank", "1", "sh", "-c", script})});
  CHECK(codes == std::vector<int>{0, 0});
  CHECK(slurp(d / "attempts.0") == "0\n1\n");  // node 0's worker was stopped and restarted too
  CHECK(slurp(d / "attempts.1") == "0\n1\n");
}

TEST_CASE("a node that never arrives: exit 121 saying how many nodes arrived") {
  ScratchDir d;
  const int port = free_port_pair();
  auto r = launch(d, {"--nnodes", "2", "--rdzv-backend", "tcp", "--rdzv-endpoint",
                      "127.0.0.1:" + std::to_string(port), "--rdzv-conf", "timeout=2", "true"});
  CHECK(r.code == 121);
  CHECK(r.err.find("1 of 2 nodes arrived") != std::string::npos);
  // while it waited it said so (stderr is a file here: whole lines, no carriage returns)
  CHECK(r.err.find("ddp-launch: waiting for nodes (run 'none', round 0, ") != std::string::npos);
  CHECK(r.err.find("1 of 2 arrived (") != std::string::npos);
  CHECK(r.err.find("= node 0); awaiting node rank(s) 1\n") != std::string::npos);
  CHECK(r.err.find('\r') == std::string::npos);
  // a static node 1 whose node 0 never comes: the store is unreachable
  auto lone = launch(d, {"--nnodes", "2", "--node-rank", "1", "--master-addr", "127.0.0.1", "--master-port",
                         std::to_string(port), "--rdzv-conf", "timeout=2", "true"});
  CHECK(lone.code == 121);
  CHECK(lone.err.find("did not answer") != std::string::npos);
  // a store host that does not resolve fails at once, not after the timeout
  auto typo =
      launch(d, {"--nnodes", "2", "--node-rank", "1", "--master-addr", "no-such-host.invalid", "true"});
  CHECK(typo.code == 121);
  CHECK(typo.err.find("does not resolve") != std::string::npos);
}

TEST_CASE("Ctrl-C while waiting for other nodes stops the launcher with 130") {
  ScratchDir d;
  const int port = free_port_pair();
  Child c({launcher_path(), "--nnodes", "2", "--rdzv-backend", "tcp", "--rdzv-endpoint",
           "127.0.0.1:" + std::to_string(port), "true"},
          {{"DDP_LOG_LEVEL", "info"}}, d / "out", d / "err");
  REQUIRE(
      eventually([&] { return slurp(d / "err").find("hosting the rendezvous store") != std::string::npos; }));
  ::kill(c.pid(), SIGINT);
  CHECK(c.wait() == 130);
}

TEST_CASE("two launchers claiming the same node rank: exit 121 naming the conflict") {
  ScratchDir d;
  const int port = free_port_pair();
  auto common = std::vector<std::string>{"--nnodes",        "2",
                                         "--rdzv-backend",  "tcp",
                                         "--rdzv-endpoint", "127.0.0.1:" + std::to_string(port),
                                         "--rdzv-conf",     "timeout=20",
                                         "--node-rank"};
  // The conflict ends both at once; the timeout only has to outlast a slow start on a loaded
  // machine (at 3 s a late second launcher made the first fail for a missing node instead).
  auto codes = run_nodes(d, {with(common, {"0", "true"}), with(common, {"0", "true"})});
  CHECK(codes == std::vector<int>{121, 121});
  std::string errs = slurp(d / "node0.err") + slurp(d / "node1.err");
  CHECK_MESSAGE(errs.find("claimed twice") != std::string::npos, errs);
}
