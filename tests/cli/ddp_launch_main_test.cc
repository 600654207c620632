// Black-box tests of build/bin/ddp-launch on one node: one TEST_CASE per promise of the command
// line (environment, exit codes, stopping, no survivors, signals, restarts, logs, configs, dry
// run, DDP_LAUNCH_* variables). Workers are small sh scripts. Multi-node: ddp_launch_nodes_test.
#include <doctest/doctest.h>
#include <limits.h>
#include <poll.h>
#include <sys/ioctl.h>

#include <nlohmann/json.hpp>
#include <set>

#include "common/machine.h"
#include "launch_test_util.h"

using namespace ddp::test;

namespace {

// A worker script: `sh -c SCRIPT`.
std::vector<std::string> sh(const std::string& script) { return {"sh", "-c", script}; }

bool is_hex(const std::string& s, size_t n) {
  return s.size() == n && s.find_first_not_of("0123456789abcdef") == std::string::npos;
}

std::vector<std::string> cat(std::vector<std::string> a, const std::vector<std::string>& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

}  // namespace

TEST_CASE("every worker gets its rank's environment") {
  ScratchDir d;
  auto r = launch(d, cat({"--standalone", "--nproc-per-node", "3", "--env", "EXTRA=x=1", "--role", "trainer"},
                         sh("env > " + d.path() + "/env.$RANK")));
  REQUIRE(r.code == 0);
  std::set<std::string> tokens, stores, ports, run_ids;
  for (int rank = 0; rank < 3; ++rank) {
    auto env = parse_env_dump(slurp(d / ("env." + std::to_string(rank))));
    CAPTURE(rank);
    CHECK(env["RANK"] == std::to_string(rank));
    CHECK(env["LOCAL_RANK"] == std::to_string(rank));
    CHECK(env["WORLD_SIZE"] == "3");
    CHECK(env["LOCAL_WORLD_SIZE"] == "3");
    CHECK(env["GROUP_RANK"] == "0");
    CHECK(env["ROLE_NAME"] == "trainer");
    CHECK(env["MASTER_ADDR"] == "127.0.0.1");
    CHECK(env["TORCHELASTIC_RESTART_COUNT"] == "0");
    CHECK(env["DDP_NODE_RANK"] == "0");
    CHECK(env["DDP_LOCAL_CPUS"] ==
          std::to_string(ddp::affinity_cpus()));  // the launcher's, inherited from us
    CHECK(env["OMP_NUM_THREADS"] == "1");
    CHECK(env["EXTRA"] == "x=1");
    CHECK(is_hex(env["DDP_JOB_TOKEN"], 32));
    CHECK(env["DDP_STORE"].starts_with("127.0.0.1:"));
    CHECK(env["DDP_STORE"].size() > 10);
    CHECK(env["TORCHELASTIC_RUN_ID"] == env["DDP_RUN_ID"]);
    tokens.insert(env["DDP_JOB_TOKEN"]);
    stores.insert(env["DDP_STORE"]);
    ports.insert(env["MASTER_PORT"]);
    run_ids.insert(env["DDP_RUN_ID"]);
  }
  CHECK(tokens.size() == 1);
  CHECK(stores.size() == 1);
  CHECK(ports.size() == 1);
  CHECK(run_ids.size() == 1);
  // a fresh token and run id per job
  auto again = launch(d, cat({"--standalone"}, sh("env > " + d.path() + "/env.again")));
  REQUIRE(again.code == 0);
  auto env2 = parse_env_dump(slurp(d / "env.again"));
  CHECK(tokens.count(env2["DDP_JOB_TOKEN"]) == 0);
  CHECK(run_ids.count(env2["DDP_RUN_ID"]) == 0);
}

TEST_CASE("exit codes: 0, the worker's code, 128+N, 127 not found, 126 not executable") {
  ScratchDir d;
  CHECK(launch(d, cat({"--standalone", "--nproc-per-node", "2"}, sh("exit 0"))).code == 0);
  auto three = launch(d, cat({"--standalone", "--nproc-per-node", "2", "--shutdown-timeout", "5"},
                             sh("if [ $RANK = 1 ]; then exit 3; fi; exec sleep 300")));
  CHECK(three.code == 3);
  CHECK(three.err.find("exitcode  : 3") != std::string::npos);  // the failure summary
  CHECK(launch(d, cat({"--standalone"}, sh("kill -9 $$"))).code == 128 + 9);
  auto missing = launch(d, {"--standalone", d / "no-such-program"});
  CHECK(missing.code == 127);
  write_file(d / "not-executable", "#!/bin/sh\nexit 0\n");
  CHECK(launch(d, {"--standalone", d / "not-executable"}).code == 126);
}

TEST_CASE("a worker killed: the rest are stopped, the job exits 137, nothing survives") {
  ScratchDir d;
  const std::string id = unique_id("killed");
  auto r =
      launch(d, cat({"--standalone", "--nproc-per-node", "3", "--rdzv-id", id, "--shutdown-timeout", "5"},
                    sh("if [ $RANK = 0 ]; then while [ ! -e " + d.path() +
                       "/ready.2 ]; do sleep 0.05; done; kill -9 $$; fi; "
                       "echo $$ > " +
                       d.path() + "/ready.$RANK; exec sleep 300")));
  CHECK(r.code == 137);
  CHECK(r.err.find("SIGKILL") != std::string::npos);
  CHECK(processes_with_env("DDP_RUN_ID=" + id).empty());
}

TEST_CASE("no process of the job survives the launcher: background and daemonized children") {
  ScratchDir d;
  const std::string id = unique_id("survivors");
  auto r = launch(d, cat({"--standalone", "--nproc-per-node", "2", "--rdzv-id", id},
                         sh("sleep 300 & setsid sleep 300 & (sleep 300 &) ; exit 0")));
  CHECK(r.code == 0);
  CHECK(processes_with_env("DDP_RUN_ID=" + id).empty());
}

TEST_CASE("SIGKILL to the launcher takes every worker down") {
  // The promise is "within 1 s" (PR_SET_PDEATHSIG); on a loaded 2-core CI machine we only
  // assert that they are gone within 10 s, polling /proc.
  ScratchDir d;
  const std::string id = unique_id("sigkill");
  Child c(cat({launcher_path(), "--standalone", "--nproc-per-node", "3", "--rdzv-id", id},
              sh("echo $$ > " + d.path() + "/pid.$RANK; exec sleep 300")),
          {{"TMPDIR", d.path()}}, d / "out", d / "err");  // a SIGKILLed launcher cannot remove its temp dir
  REQUIRE(eventually([&] {
    return std::filesystem::exists(d / "pid.0") && std::filesystem::exists(d / "pid.1") &&
           std::filesystem::exists(d / "pid.2");
  }));
  REQUIRE(eventually([&] { return processes_with_env("DDP_RUN_ID=" + id).size() == 3; }));
  ::kill(c.pid(), SIGKILL);
  CHECK(c.wait() == 137);
  CHECK(eventually([&] { return processes_with_env("DDP_RUN_ID=" + id).empty(); }, std::chrono::seconds(10)));
}

TEST_CASE("SIGINT is forwarded to the workers and the launcher exits 130") {
  ScratchDir d;
  Child c(cat({launcher_path(), "--standalone", "--nproc-per-node", "2"},
              sh("trap 'echo INT > " + d.path() + "/got.$RANK; exit 0' INT; echo > " + d.path() +
                 "/ready.$RANK; sleep 300 & wait")),
          {}, d / "out", d / "err");
  REQUIRE(eventually(
      [&] { return std::filesystem::exists(d / "ready.0") && std::filesystem::exists(d / "ready.1"); }));
  ::kill(c.pid(), SIGINT);
  CHECK(c.wait() == 130);
  CHECK(slurp(d / "got.0") == "INT\n");
  CHECK(slurp(d / "got.1") == "INT\n");
}

TEST_CASE("a worker that fails only on the first attempt: --max-restarts 1 succeeds") {
  ScratchDir d;
  const std::string script =
      "echo $TORCHELASTIC_RESTART_COUNT >> " + d.path() +
      "/attempts.$RANK; "
      "if [ $TORCHELASTIC_RESTART_COUNT = 0 ] && [ $RANK = 1 ]; then exit 5; fi; exit 0";
  auto ok = launch(
      d, cat({"--standalone", "--nproc-per-node", "2", "--max-restarts", "1", "--shutdown-timeout", "5"},
             sh(script)));
  CHECK(ok.code == 0);
  CHECK(slurp(d / "attempts.1") == "0\n1\n");
  CHECK(slurp(d / "attempts.0").find("1\n") != std::string::npos);
  // without restarts the same job fails with the worker's code
  ScratchDir d2;
  auto fail =
      launch(d2, cat({"--standalone", "--nproc-per-node", "2"}, sh("[ $RANK = 1 ] && exit 5; exit 0")));
  CHECK(fail.code == 5);
  // always failing: restarts run out, the last code is the job's
  auto always =
      launch(d2, cat({"--standalone", "--max-restarts", "2"}, sh("echo x >> " + d2.path() + "/n; exit 4")));
  CHECK(always.code == 4);
  CHECK(slurp(d2 / "n") == "x\nx\nx\n");
}

TEST_CASE("log files per attempt and rank; console lines prefixed like torchrun's, [default<local rank>]:") {
  ScratchDir d;
  const std::string id = unique_id("logs");
  auto r = launch(d, cat({"--standalone", "--nproc-per-node", "2", "--rdzv-id", id, "--log-dir", d / "logs",
                          "--tee", "3"},
                         sh("echo out-$RANK; echo err-$RANK >&2")));
  REQUIRE(r.code == 0);
  for (int rank = 0; rank < 2; ++rank) {
    std::string dir = d.path() + "/logs/" + id + "/attempt_0/" + std::to_string(rank) + "/";
    CHECK(slurp(dir + "stdout.log").find("out-" + std::to_string(rank)) != std::string::npos);
    CHECK(slurp(dir + "stderr.log").find("err-" + std::to_string(rank)) != std::string::npos);
  }
  CHECK(r.out.find("[default0]:out-0") != std::string::npos);
  CHECK(r.out.find("[default1]:out-1") != std::string::npos);
  CHECK(r.err.find("[default1]:err-1") != std::string::npos);
  CHECK(r.out.find('\x1b') == std::string::npos);  // not a terminal: no colour
  // torchrun's template; a second job with no --rdzv-id writes to a log directory of its own
  auto t = launch(
      d,
      cat({"--standalone", "--nproc-per-node", "2", "--log-dir", d / "logs", "--role", "w"}, sh("echo hi")),
      {{"TORCHELASTIC_LOG_LINE_PREFIX_TEMPLATE", "<${role_name}:${rank}/${local_rank}> "}});
  REQUIRE(t.code == 0);
  CHECK(t.out.find("<w:1/1> hi") != std::string::npos);
}

TEST_CASE("torchrun command lines: abbreviations, PET_ variables, --standalone with --rdzv-*, PYTHON_EXEC") {
  ScratchDir d;
  auto abbrev = launch(d, {"--dry-run", "--nproc", "2", "--start-method", "fork", "true"});
  REQUIRE(abbrev.code == 0);
  CHECK(abbrev.out.find("rank 1 (local rank 1)") != std::string::npos);
  auto ambiguous = launch(d, {"--no", "true"});
  CHECK(ambiguous.code == 2);
  CHECK(ambiguous.err.find("ambiguous option '--no' could match") != std::string::npos);
  auto pet = launch(d, {"--dry-run", "true"}, {{"PET_NPROC_PER_NODE", "3"}});
  CHECK(pet.out.find("rank 2 (local rank 2)") != std::string::npos);
  auto standalone =
      launch(d, {"--standalone", "--rdzv-backend", "c10d", "--rdzv-endpoint", "localhost:29400", "true"});
  CHECK(standalone.code == 0);
  CHECK(standalone.err.find("ddp-launch: warning: rdzv_endpoint (from --rdzv-endpoint) is ignored") !=
        std::string::npos);
  // two single-node jobs with torchrun's recipe get MASTER_PORTs of their own
  auto port_of = [&](const Result& r) { return r.out.substr(r.out.find("MASTER_PORT=") + 12, 5); };
  auto one = launch(d, {"--dry-run", "--rdzv-backend", "c10d", "--rdzv-endpoint", "localhost:0", "true"});
  auto two = launch(d, {"--dry-run", "--rdzv-backend", "c10d", "--rdzv-endpoint", "localhost:0", "true"});
  CHECK(port_of(one) != "29500");
  CHECK(port_of(one) != port_of(two));
  // PYTHON_EXEC runs .py programs (here a shell, so no Python is needed); the summary names the script
  write_file(d / "fail.py", "exit 3\n");
  auto py = launch(d, {"--standalone", d / "fail.py"}, {{"PYTHON_EXEC", "/bin/sh"}});
  CHECK(py.code == 3);
  CHECK(py.err.find(d / "fail.py" + " FAILED") != std::string::npos);
  // srun with several tasks per node: a clear error, with what to do
  auto srun = launch(d, {"true"},
                     {{"SLURM_STEP_NUM_NODES", "1"}, {"SLURM_STEP_NUM_TASKS", "4"}, {"SLURM_NODEID", "0"}});
  CHECK(srun.code == 2);
  CHECK(srun.err.find("--ntasks-per-node=1") != std::string::npos);
}

TEST_CASE("config errors name the file, the line and the key, with a did-you-mean; exit 2") {
  ScratchDir d;
  write_file(d / "job.json", "{\n  \"nproc_per_node\": 2,\n  \"max_restart\": 1\n}\n");
  auto r = launch(d, {"--config", d / "job.json", "true"});
  CHECK(r.code == 2);
  CHECK(r.err.find(d / "job.json" + " line 3") != std::string::npos);
  CHECK(r.err.find("'max_restart'") != std::string::npos);
  CHECK(r.err.find("did you mean 'max_restarts'?") != std::string::npos);
  write_file(d / "bad.json", "{\n  \"nnodes\": 2,\n  \"standalone\": true\n}\n");
  auto combo = launch(d, {"--config", d / "bad.json", "true"});
  CHECK(combo.code == 2);
  CHECK(combo.err.find("line 3") != std::string::npos);
  CHECK(combo.err.find("line 2") != std::string::npos);
  write_file(d / "broken.json", "{\n  \"nnodes\": 2,,\n}\n");
  auto broken = launch(d, {"--config", d / "broken.json", "true"});
  CHECK(broken.code == 2);
  CHECK(broken.err.find("line 2, column") != std::string::npos);
  // a flag overrides the file
  write_file(d / "good.json", "{\"nproc_per_node\": 3, \"standalone\": true}");
  auto good = launch(
      d, cat({"--config", d / "good.json", "--nproc-per-node", "2"}, sh("touch " + d.path() + "/w.$RANK")));
  CHECK(good.code == 0);
  CHECK(std::filesystem::exists(d / "w.1"));
  CHECK_FALSE(std::filesystem::exists(d / "w.2"));
}

TEST_CASE("usage errors exit 2 with a did-you-mean; --help and --version exit 0") {
  ScratchDir d;
  auto typo = launch(d, {"--nproc-per-mode", "2", "true"});
  CHECK(typo.code == 2);
  CHECK(typo.err.find("did you mean '--nproc-per-node'?") != std::string::npos);
  auto mcast = launch(d, {"--rdzv-backend", "multicast", "true"});
  CHECK(mcast.code == 2);
  CHECK(mcast.err.find("needs rdzv_endpoint GROUP:PORT") != std::string::npos);
  CHECK(launch(d, {}).code == 2);
  auto help = launch(d, {"--help"});
  CHECK(help.code == 0);
  CHECK(help.out.find("Exit codes:") != std::string::npos);
  CHECK(help.out.find("Examples:") != std::string::npos);
  auto version = launch(d, {"--version"});
  CHECK(version.code == 0);
  CHECK(version.out.find("ddp-launch ") == 0);
}

TEST_CASE("--dry-run prints each rank's command and environment and starts nothing") {
  ScratchDir d;
  auto r = launch(d, cat({"--dry-run", "--nnodes", "2", "--node-rank", "1", "--master-addr", "10.1.2.3",
                          "--nproc-per-node", "2", "--env", "A=1"},
                         sh("touch " + d.path() + "/ran")));
  REQUIRE(r.code == 0);
  CHECK(r.out.find("rank 2 (local rank 0): sh -c 'touch") != std::string::npos);
  CHECK(r.out.find("rank 3 (local rank 1)") != std::string::npos);
  CHECK(r.out.find("RANK=3") != std::string::npos);
  CHECK(r.out.find("WORLD_SIZE=4") != std::string::npos);
  CHECK(r.out.find("MASTER_ADDR=10.1.2.3") != std::string::npos);
  CHECK(r.out.find("A=1") != std::string::npos);
  CHECK_FALSE(std::filesystem::exists(d / "ran"));
}

TEST_CASE("--dry-run explains a multicast rendezvous") {
  ScratchDir d;
  auto r = launch(d, {"--dry-run", "--nnodes", "2", "--rdzv-backend", "multicast", "--rdzv-endpoint",
                      "239.7.7.7:29400", "--rdzv-id", "job9", "--rdzv-conf", "timeout=3", "true"});
  REQUIRE(r.code == 0);
  CHECK(r.out.find("multicast rendezvous on 239.7.7.7:29400 (TTL 1") != std::string::npos);
  CHECK(r.out.find("only launchers of job 'job9' are counted") != std::string::npos);
  CHECK(r.out.find("a free rank in the order of the launchers' addresses") != std::string::npos);
  CHECK(r.out.find("within 3000 ms: every launcher exits 121") != std::string::npos);
}

TEST_CASE("DDP_LAUNCH_* variables set flags; the command line wins") {
  ScratchDir d;
  auto r = launch(d, sh("touch " + d.path() + "/w.$RANK"),
                  {{"DDP_LAUNCH_NPROC_PER_NODE", "3"}, {"DDP_LAUNCH_STANDALONE", "1"}});
  CHECK(r.code == 0);
  CHECK(std::filesystem::exists(d / "w.2"));
  ScratchDir d2;
  auto flag_wins = launch(d2, cat({"--nproc-per-node", "1"}, sh("touch " + d2.path() + "/w.$RANK")),
                          {{"DDP_LAUNCH_NPROC_PER_NODE", "3"}, {"DDP_LAUNCH_STANDALONE", "true"}});
  CHECK(flag_wins.code == 0);
  CHECK(std::filesystem::exists(d2 / "w.0"));
  CHECK_FALSE(std::filesystem::exists(d2 / "w.1"));
  auto bad = launch(d2, {"true"}, {{"DDP_LAUNCH_MAX_RESTART", "1"}});
  CHECK(bad.code == 2);
  CHECK(bad.err.find("did you mean 'DDP_LAUNCH_MAX_RESTARTS'?") != std::string::npos);
}

// Its own ctest (cli_ddp_launch_main_test_python3): Skipped, not Passed, without python3.
bool has_python3() { return ::system("command -v python3 > /dev/null 2>&1") == 0; }

TEST_CASE("a .py program runs with python3" * doctest::skip(!has_python3())) {
  ScratchDir d;
  write_file(d / "w.py",
             "import os\nopen(os.environ['OUT'] + '/py.' + os.environ['RANK'], 'w').write('ok')\n");
  auto r = launch(d, {"--standalone", "--nproc-per-node", "2", "--env", "OUT=" + d.path(), d / "w.py"});
  CHECK(r.code == 0);
  CHECK(slurp(d / "py.1") == "ok");
}

namespace {

// Entries of `dir` whose names start with `prefix`.
std::vector<std::string> entries_starting(const std::string& dir, const std::string& prefix) {
  std::vector<std::string> out;
  for (const auto& e : std::filesystem::directory_iterator(dir)) {
    if (e.path().filename().string().starts_with(prefix)) out.push_back(e.path().string());
  }
  return out;
}

}  // namespace

TEST_CASE("unusual input never crashes the launcher: numbers in a config, a worker's error file") {
  ScratchDir d;
  // 1e400 used to abort the launcher with an uncaught nlohmann exception (exit 134, core).
  write_file(d / "huge.json", "{\n  \"standalone\": true,\n  \"max_restarts\": 1e400\n}\n");
  auto huge = launch(d, {"--config", d / "huge.json", "true"});
  CHECK(huge.code == 2);
  CHECK(huge.err.find(d / "huge.json" + " line 3, column") != std::string::npos);
  // Whole numbers written as 3.0 or -0 are integers.
  write_file(d / "whole.json", "{\"standalone\": true, \"nproc_per_node\": 2.0, \"max_restarts\": -0}");
  CHECK(launch(d, {"--config", d / "whole.json", "true"}).code == 0);

  // An error file nested 100,000 deep used to crash the launcher (SIGSEGV): no summary, and
  // its temp directory left behind. Now: the summary, the worker's exit code, nothing left.
  write_file(d / "deep.json", "{\"message\": " + std::string(100000, '[') + std::string(100000, ']') + "}");
  const std::string tmp = d / "tmp";
  std::filesystem::create_directory(tmp);
  auto deep = launch(
      d, cat({"--standalone"}, sh("cp " + d.path() + "/deep.json \"$TORCHELASTIC_ERROR_FILE\"; exit 3")),
      {{"TMPDIR", tmp}});
  CHECK(deep.code == 3);
  CHECK(deep.err.find("Root Cause") != std::string::npos);
  CHECK(deep.err.find("traceback : {\"message\": [[[") != std::string::npos);
  CHECK(entries_starting(tmp, "ddp-launch-").empty());
}

TEST_CASE("run ids cannot climb out of the log dir; log files never follow or truncate what is there") {
  ScratchDir d;
  auto escape = launch(d, {"--standalone", "--rdzv-id", "../../x", "--log-dir", d / "logs", "true"});
  CHECK(escape.code == 2);
  CHECK(escape.err.find("'../../x' is not a run id") != std::string::npos);
  CHECK_FALSE(std::filesystem::exists(d / "logs"));

  // A symlink planted where a log directory level goes is refused; its target stays untouched.
  std::filesystem::create_directories(d / "logs/job1");
  std::filesystem::create_directory(d / "victim");
  write_file(d / "victim/stdout.log", "keep me");
  std::filesystem::create_directory_symlink(d / "victim", d / "logs/job1/attempt_0");
  auto planted = launch(d, {"--standalone", "--rdzv-id", "job1", "--log-dir", d / "logs", "echo", "hi"});
  CHECK(planted.code == 123);
  CHECK(planted.err.find("not a directory") != std::string::npos);
  CHECK(slurp(d / "victim/stdout.log") == "keep me");

  // A second job with the same run id and log dir does not overwrite the first one's logs.
  CHECK(launch(d, {"--standalone", "--rdzv-id", "job2", "--log-dir", d / "logs", "echo", "first"}).code == 0);
  auto again = launch(d, {"--standalone", "--rdzv-id", "job2", "--log-dir", d / "logs", "echo", "second"});
  CHECK(again.code == 123);
  CHECK(again.err.find("exists already") != std::string::npos);
  CHECK(slurp(d / "logs/job2/attempt_0/0/stdout.log") == "first\n");
  using std::filesystem::perms;
  const perms mode = std::filesystem::status(d / "logs/job2/attempt_0/0/stdout.log").permissions();
  CHECK((mode & (perms::group_write | perms::others_all)) == perms::none);  // 0640 at most
}

TEST_CASE("a console nobody reads does not freeze the launcher: SIGTERM still stops the job") {
  ScratchDir d;
  const std::string id = unique_id("stall");
  int p[2];
  REQUIRE(::pipe2(p, O_CLOEXEC) == 0);
  ddp::Fd reader(p[0]), writer(p[1]);
  // ddp-launch's stdout is the pipe's write end; this test never reads the other end. The
  // console is relayed (prefixed, --local-ranks-filter) without log files; each worker writes
  // 8 MB, more than the pipe and the launcher's buffer hold, then waits.
  std::vector<std::string> argv =
      cat({launcher_path(), "--standalone", "--nproc-per-node", "2", "--local-ranks-filter", "0,1",
           "--rdzv-id", id, "--shutdown-timeout", "5"},
          sh("echo $$ > " + d.path() +
             "/pid.$RANK; yes 'a line of worker output' | head -c 8000000; "
             "exec sleep 300"));
  std::vector<char*> args;
  for (auto& a : argv) args.push_back(a.data());
  args.push_back(nullptr);
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_adddup2(&fa, writer.get(), 1);
  posix_spawn_file_actions_addopen(&fa, 2, (d / "err").c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  pid_t launcher = -1;
  REQUIRE(posix_spawn(&launcher, args[0], &fa, nullptr, args.data(), environ) == 0);
  posix_spawn_file_actions_destroy(&fa);
  // A probe of our own (non-blocking) on the write end, to see when the pipe is full.
  ddp::Fd probe(
      ::open(("/proc/self/fd/" + std::to_string(writer.get())).c_str(), O_WRONLY | O_NONBLOCK | O_CLOEXEC));
  REQUIRE(probe);
  writer.reset();
  // Both workers run and the pipe is full: no free slot, so a blocking relay would now be stuck
  // in write(2). (Not "bytes queued near the capacity": writes that do not end on a page
  // boundary leave slots part-filled, so a full pipe may hold far less than its capacity.)
  REQUIRE(eventually([&] {
    pollfd p{probe.get(), POLLOUT, 0};
    return std::filesystem::exists(d / "pid.1") && ::poll(&p, 1, 0) == 0;
  }));
  REQUIRE(eventually([&] { return processes_with_env("DDP_RUN_ID=" + id).size() == 2; }));
  ::kill(launcher, SIGTERM);
  int status = 0;
  // Generous: only a launcher frozen by its console would take this long (not a timing check).
  const bool exited =
      eventually([&] { return ::waitpid(launcher, &status, WNOHANG) == launcher; }, std::chrono::seconds(60));
  if (!exited) {
    ::kill(launcher, SIGKILL);
    ::waitpid(launcher, &status, 0);
  }
  CHECK(exited);
  CHECK((WIFEXITED(status) && WEXITSTATUS(status) == 128 + SIGTERM));
  CHECK(eventually([&] { return processes_with_env("DDP_RUN_ID=" + id).empty(); }));
  const std::string err = slurp(d / "err");
  CHECK(err.find("bytes of worker output: stdout blocked") != std::string::npos);
}

TEST_CASE("a stderr nobody reads does not block the launcher's own lines: restarts, summaries, exit code") {
  ScratchDir d;
  const std::string id = unique_id("stderr-stall");
  int p[2];
  REQUIRE(::pipe2(p, O_CLOEXEC) == 0);
  ddp::Fd reader(p[0]), writer(p[1]);
  // Fill the pipe first, through a description of our own (the launcher's stays blocking): its
  // first log line would then block a plain write(2) forever.
  {
    ddp::Fd filler(
        ::open(("/proc/self/fd/" + std::to_string(writer.get())).c_str(), O_WRONLY | O_NONBLOCK | O_CLOEXEC));
    REQUIRE(filler);
    const std::string block(4096, 'f');
    while (::write(filler.get(), block.data(), block.size()) > 0) {
    }
  }
  REQUIRE((::fcntl(writer.get(), F_GETFL) & O_NONBLOCK) == 0);
  // Three restarts of a worker that fails: every one logs lines and prints a summary.
  std::vector<std::string> argv =
      cat({launcher_path(), "--standalone", "--nproc-per-node", "2", "--rdzv-id", id, "--max-restarts", "3"},
          sh("exit 3"));
  std::vector<char*> args;
  for (auto& a : argv) args.push_back(a.data());
  args.push_back(nullptr);
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_addopen(&fa, 1, "/dev/null", O_WRONLY, 0);
  posix_spawn_file_actions_adddup2(&fa, writer.get(), 2);
  pid_t launcher = -1;
  REQUIRE(posix_spawn(&launcher, args[0], &fa, nullptr, args.data(), environ) == 0);
  posix_spawn_file_actions_destroy(&fa);
  writer.reset();
  int status = 0;
  // Generous: only a launcher blocked on its stderr would take this long (not a timing check).
  const bool exited =
      eventually([&] { return ::waitpid(launcher, &status, WNOHANG) == launcher; }, std::chrono::seconds(60));
  if (!exited) {
    ::kill(launcher, SIGKILL);
    ::waitpid(launcher, &status, 0);
  }
  CHECK(exited);
  CHECK((WIFEXITED(status) && WEXITSTATUS(status) == 3));
  CHECK(eventually([&] { return processes_with_env("DDP_RUN_ID=" + id).empty(); }));
}

TEST_CASE("a worker killed while it set up a tcp group: its shm segment is removed, nobody else's") {
  ScratchDir d;
  // The worker creates a segment by the tcp backend's naming rule (common/shm_names.h), as rank
  // 0 does before every rank has mapped and unlinked it, and dies there.
  const std::string decoy = "/dev/shm/ddp-tcp-999999003-00000000000000aa";  // no worker's pid
  write_file(decoy, "");
  auto r = launch(
      d, cat({"--standalone"}, sh("name=/dev/shm/ddp-tcp-$$-0123456789abcdef; : > $name; echo $name > " +
                                  d.path() + "/name; kill -9 $$")));
  CHECK(r.code == 137);
  const std::string name = slurp(d / "name").substr(0, slurp(d / "name").find('\n'));
  REQUIRE(name.starts_with("/dev/shm/ddp-tcp-"));
  CHECK_FALSE(std::filesystem::exists(name));
  CHECK(std::filesystem::exists(decoy));
  std::filesystem::remove(decoy);
}

namespace {

std::vector<nlohmann::json> json_lines(const std::string& text) {
  std::vector<nlohmann::json> out;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) {
    if (!line.empty() && line[0] == '{') out.push_back(nlohmann::json::parse(line));
  }
  return out;
}

}  // namespace

TEST_CASE("--event-log-handler: a failing job's events, in order, as JSON lines") {
  ScratchDir d;
  // Rank 1 fails with 3 in every round; rank 0 would run on and is stopped (SIGTERM).
  const std::string script = "[ $RANK = 1 ] && exit 3; exec sleep 30";
  auto r = launch(d, cat({"--standalone", "--nproc-per-node", "2", "--max-restarts", "1", "--rdzv-id",
                          "evjob", "--event-log-handler", "file:" + (d / "events.jsonl")},
                         sh(script)));
  CHECK(r.code == 3);
  const auto events = json_lines(slurp(d / "events.jsonl"));
  REQUIRE(events.size() >= 2);
  std::vector<std::string> names;
  for (const auto& e : events) {
    names.push_back(e.at("event"));
    CHECK(e.at("time").get<double>() > 1.5e9);
    CHECK(e.at("run_id") == "evjob");
    CHECK(e.at("launcher_pid").get<int>() > 0);
  }
  // Per round: start, two workers started, two exited, the end; one restart between the rounds.
  const std::vector<std::string> round = {"round_start", "worker_start", "worker_start",
                                          "worker_exit", "worker_exit",  "round_end"};
  std::vector<std::string> expected = {"launcher_start"};
  expected.insert(expected.end(), round.begin(), round.end());
  expected.push_back("restart");
  expected.insert(expected.end(), round.begin(), round.end());
  expected.push_back("launcher_exit");
  CHECK(names == expected);
  REQUIRE(names == expected);
  for (int n : {0, 1}) {
    const size_t base = 1 + static_cast<size_t>(n) * 7;
    CHECK(events[base].at("round") == n);
    CHECK(events[base].at("world_size") == 2);
    // The failing worker goes first, with its code; rank 0 is stopped by SIGTERM.
    const auto& first = events[base + 3];
    CHECK(first.at("rank") == 1);
    CHECK(first.at("exit_code") == 3);
    CHECK(first.at("signal").is_null());
    CHECK(first.at("while_stopping") == false);
    const auto& second = events[base + 4];
    CHECK(second.at("rank") == 0);
    CHECK(second.at("signal") == "SIGTERM");
    CHECK(second.at("while_stopping") == true);
    const auto& end = events[base + 5];
    CHECK(end.at("outcome") == "failed");
    CHECK(end.at("exit_code") == 3);
    REQUIRE(end.at("failures").size() == 1);
    CHECK(end.at("failures")[0].at("rank") == 1);
    CHECK(end.at("failures")[0].at("exit_code") == 3);
  }
  CHECK(events[7].at("restart") == 1);
  CHECK(events.back().at("exit_code") == 3);
  CHECK(events.back().at("status") == "workers_failed");
  // console: the same lines on stderr; null (the default): none anywhere.
  auto console = launch(d, cat({"--standalone", "--event-log-handler", "console"}, sh("exit 0")));
  CHECK(console.code == 0);
  const auto on_stderr = json_lines(console.err);
  REQUIRE(!on_stderr.empty());
  CHECK(on_stderr.back().at("event") == "launcher_exit");
  CHECK(json_lines(launch(d, cat({"--standalone"}, sh("exit 0"))).err).empty());
  auto bad = launch(d, cat({"--standalone", "--event-log-handler", "syslog"}, sh("exit 0")));
  CHECK(bad.code == 2);
  CHECK(bad.err.find("not an event log handler here") != std::string::npos);
}
