// The fault matrix, launcher column: ddp-launch running three ddp_fault_worker ranks on the tcp
// backend (an all_reduce loop), one fault injected once every rank is inside it. Each trial
// checks: the launcher exits non-zero within the configured timeouts (the bound is only "no
// hang") with a summary naming the rank at fault; no process of the job is left (workers run
// in their own sessions, so this walks /proc for the job's marker); no /dev/shm segment is left.
#include <doctest/doctest.h>

#include "faults/fault_trial.h"

using namespace ddp::test;
using namespace ddp::test::faults;

namespace {

std::vector<std::string> launch_argv(const Trial& t, const std::vector<std::string>& worker_extra = {}) {
  std::vector<std::string> argv = {launcher_path(),
                                   "--nproc-per-node",
                                   "3",
                                   "--rdzv-id",
                                   t.id(),
                                   "--master-port",
                                   std::to_string(free_port_pair()),
                                   worker_path(),
                                   "--backend",
                                   "tcp",
                                   "--dir",
                                   t.dir().path()};
  argv.insert(argv.end(), worker_extra.begin(), worker_extra.end());
  return argv;
}

std::map<std::string, std::string> job_env() { return {{"DDP_TIMEOUT_MS", "4000"}}; }

void check_clean(Trial& t) {
  auto left = t.stray();
  CHECK_MESSAGE(left.empty(), left.size(), " process(es) of the job left");
  kill_all(left);
  CHECK(t.shm_left().empty());
}

}  // namespace

TEST_CASE("fault: launcher, a worker SIGKILLed mid-collective") {
  Trial t("launch-kill");
  Child& launcher = t.start(launch_argv(t), job_env());
  REQUIRE(t.wait_ready(3));
  ::kill(t.rank_pid(1), SIGKILL);
  t.fault();
  const int code = t.wait(0);
  t.report("ddp-launch exit " + std::to_string(code));
  INFO(launcher.err());
  CHECK(code == 128 + SIGKILL);
  CHECK(contains(launcher.err(), "rank      : 1 (local_rank: 1)"));
  CHECK(contains(launcher.err(), "SIGKILL"));
  check_clean(t);
}

TEST_CASE("fault: launcher, a worker SIGSTOPped mid-collective") {
  Trial t("launch-stop");
  Child& launcher = t.start(launch_argv(t), job_env());
  REQUIRE(t.wait_ready(3));
  ::kill(t.rank_pid(2), SIGSTOP);
  t.fault();
  const int code = t.wait(0);
  t.report("ddp-launch exit " + std::to_string(code));
  INFO(launcher.err());
  // The others time out naming rank 2 and exit 3; the launcher stops the stopped one too.
  CHECK(code == 3);
  const std::string why = error_line(launcher.err(), 0) + error_line(launcher.err(), 1);
  CHECK(contains(why, "TimeoutError"));
  CHECK(names_rank(why, 2));
  check_clean(t);
}

TEST_CASE("fault: launcher, a worker closes its sockets in the middle of a frame") {
  Trial t("launch-close");
  auto env = job_env();
  env["DDP_TCP_TRANSPORT"] = "socket";
  // Rank 2 breaks its connections after its first op, then waits to be stopped.
  Child& launcher = t.start(launch_argv(t, {"--close-mid-frame-rank", "2"}), env);
  REQUIRE(t.wait_ready(3));
  t.fault();
  const int code = t.wait(0);
  t.report("ddp-launch exit " + std::to_string(code));
  INFO(launcher.err());
  CHECK(code == 3);
  const std::string why = error_line(launcher.err(), 0) + error_line(launcher.err(), 1);
  CHECK(contains(why, "NetworkError"));
  CHECK(names_rank(why, 2));
  check_clean(t);
}

TEST_CASE("fault: launcher SIGKILLed mid-collective") {
  Trial t("launch-killed");
  t.start(launch_argv(t), job_env());
  REQUIRE(t.wait_ready(3));
  ::kill(t.child(0).pid(), SIGKILL);
  t.fault();
  CHECK(t.wait(0) == 128 + SIGKILL);
  // The workers die with it (PR_SET_PDEATHSIG): none is left.
  const bool gone = eventually([&] { return t.stray().empty(); }, kEndBound);
  t.report(gone ? "every worker gone" : "workers left");
  CHECK(gone);
  check_clean(t);
}

TEST_CASE("fault: launcher SIGTERMed mid-collective") {
  Trial t("launch-term");
  Child& launcher = t.start(launch_argv(t), job_env());
  REQUIRE(t.wait_ready(3));
  ::kill(launcher.pid(), SIGTERM);
  t.fault();
  const int code = t.wait(0);
  t.report("ddp-launch exit " + std::to_string(code));
  INFO(launcher.err());
  CHECK(code == 128 + SIGTERM);
  check_clean(t);
}

TEST_CASE("fault: launcher, the node hosting the store killed") {
  Trial t("launch-store");
  const int port = free_port_pair();
  auto node = [&](int rank) {
    return std::vector<std::string>{launcher_path(),
                                    "--nnodes",
                                    "2",
                                    "--node-rank",
                                    std::to_string(rank),
                                    "--nproc-per-node",
                                    "1",
                                    "--master-addr",
                                    "127.0.0.1",
                                    "--master-port",
                                    std::to_string(port),
                                    "--rdzv-id",
                                    t.id(),
                                    "--monitor-interval",
                                    "0.2",
                                    worker_path(),
                                    "--backend",
                                    "tcp",
                                    "--dir",
                                    t.dir().path()};
  };
  t.start(node(0), job_env());
  Child& survivor = t.start(node(1), job_env());
  REQUIRE(t.wait_ready(2));
  ::kill(t.child(0).pid(), SIGKILL);
  t.fault();
  const int code = t.wait(1);
  t.report("node 1's ddp-launch exit " + std::to_string(code));
  INFO(survivor.err());
  CHECK(code > 0);
  CHECK(code < 128);  // an error exit: not a crash (134, 139), nor a kill, nor a hang (-1)
  CHECK(contains(survivor.err(), "127.0.0.1:" + std::to_string(port + 1)));
  check_clean(t);
}

TEST_CASE("fault: launcher, a worker's error file is garbage") {
  Trial t("launch-errfile");
  // Invalid UTF-8, control characters, broken JSON, then exit 5.
  const std::string script =
      "if [ \"$RANK\" = 1 ]; then printf '{\"message\": \\001\\377\\033[2J{{{' > "
      "\"$TORCHELASTIC_ERROR_FILE\"; exit 5; fi; exec sleep 30";
  Child& launcher = t.start({launcher_path(), "--nproc-per-node", "2", "--rdzv-id", t.id(), "--master-port",
                             std::to_string(free_port_pair()), "sh", "-c", script});
  t.fault();
  const int code = t.wait(0);
  t.report("ddp-launch exit " + std::to_string(code));
  INFO(launcher.err());
  CHECK(code == 5);
  CHECK(contains(launcher.err(), "rank      : 1 (local_rank: 1)"));
  CHECK(!contains(launcher.err(), "\033[2J"));  // the control characters were made printable
  check_clean(t);
}

TEST_CASE(
    "fault: launcher, two nodes, a DDP worker SIGKILLed mid-backward; --max-restarts 1 re-forms the group") {
  Trial t("launch-ddp-restart");
  const int port = free_port_pair();
  // Node 0 (rank 0, the store's host) looks at the round's outcome only every 5 s: longer than
  // the collectives' 3 s timeout, so its worker's own error comes first, not the launcher's stop.
  auto node = [&](int rank, const char* monitor) {
    return std::vector<std::string>{launcher_path(),
                                    "--nnodes",
                                    "2",
                                    "--node-rank",
                                    std::to_string(rank),
                                    "--nproc-per-node",
                                    "1",
                                    "--master-addr",
                                    "127.0.0.1",
                                    "--master-port",
                                    std::to_string(port),
                                    "--rdzv-id",
                                    t.id(),
                                    "--max-restarts",
                                    "1",
                                    "--monitor-interval",
                                    monitor,
                                    worker_path(),
                                    "--backend",
                                    "tcp",
                                    "--dir",
                                    t.dir().path(),
                                    "--ddp",
                                    "1",
                                    "--iters",
                                    "20",
                                    "--stall-in-backward-rank",
                                    "1"};
  };
  const std::map<std::string, std::string> env = {{"DDP_TIMEOUT_MS", "3000"}};
  Child& survivor = t.start(node(0, "5"), env);
  Child& victim = t.start(node(1, "0.2"), env);
  const auto stalled = t.dir() / "in_backward.1";
  REQUIRE(eventually([&] { return std::filesystem::exists(stalled); }, std::chrono::seconds(60)));
  ::kill(static_cast<pid_t>(std::stol(slurp(stalled))), SIGKILL);
  t.fault();
  const int c0 = t.wait(0), c1 = t.wait(1);
  t.report("ddp-launch exits " + std::to_string(c0) + "," + std::to_string(c1));
  INFO(survivor.err(), "\n--- node 1:\n", victim.err());
  // Round 0: the survivor's collective failed naming the dead peer.
  const std::string why = error_line(survivor.err(), 0);
  t.report("round 0's survivor said: " + why);
  CHECK((contains(why, "NetworkError") || contains(why, "TimeoutError")));
  CHECK(names_rank(why, 1));
  // Round 1: a new group of both ranks trained to the end, every DDP gradient right.
  CHECK(c0 == 0);
  CHECK(c1 == 0);
  const std::string done = "20 iterations (all_reduce + DDP step), every result right (attempt 1, world 2)";
  CHECK(contains(survivor.out() + survivor.err(), "fault_worker rank 0: " + done));
  CHECK(contains(victim.out() + victim.err(), "fault_worker rank 1: " + done));
  check_clean(t);
}
