// Black-box tests of the Supervisor: real worker processes (/bin/sh scripts), one test per
// promise. Each run happens in a forked launcher process (see launcher_test_util.h).
#include "launcher/supervisor.h"

#include <doctest/doctest.h>

#include <algorithm>
#include <cctype>
#include <thread>

#include "launcher/cpu_bind.h"
#include "launcher_test_util.h"

using namespace ddp;
using namespace ddp::launcher;
using namespace ddp::launcher::test;

namespace {

std::map<std::string, std::string> parse_env(const std::string& text) {
  std::map<std::string, std::string> out;
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) {
    auto eq = line.find('=');
    if (eq != std::string::npos) out[line.substr(0, eq)] = line.substr(eq + 1);
  }
  return out;
}

pid_t read_pid(const std::string& path) { return static_cast<pid_t>(std::stol(read_file(path))); }

// "[<d>]:<rest>" -> d and rest; -1 when the line does not start with a one-digit prefix.
// "[default<d>]:rest" (torchrun's prefix, role "default", one-digit local rank) -> d.
int prefix_rank(const std::string& line, std::string* rest) {
  const std::string head = "[default";
  const size_t n = head.size();
  if (line.size() < n + 3 || line.compare(0, n, head) != 0 ||
      !std::isdigit(static_cast<unsigned char>(line[n])) || line[n + 1] != ']' || line[n + 2] != ':') {
    return -1;
  }
  *rest = line.substr(n + 3);
  return line[n] - '0';
}

bool all_digits(const std::string& s) {
  return !s.empty() &&
         std::all_of(s.begin(), s.end(), [](char c) { return std::isdigit(static_cast<unsigned char>(c)); });
}

}  // namespace

TEST_CASE("every worker gets torchrun's environment for its rank") {
  TempDir dir;
  LaunchOptions o = sh_options("env > " + dir.path() + "/env_$LOCAL_RANK", 2);
  o.max_restarts = 3;
  o.role = "trainer";
  o.env = {{"FOO", "bar"}, {"DDP_NODE_RANK_EXTRA", "x"}};
  rdzv::NodeAssignment a = single_node(2, "job-42");
  a.node_rank = 1;
  a.nnodes = 2;
  a.world_size = 5;
  a.rank_offset = 3;
  a.nproc_by_node = {3, 2};
  a.master_addr = "10.1.2.3";
  a.master_port = 29777;
  a.store_endpoint = "10.1.2.3:29400";
  a.job_token = "s3cret";
  ::unsetenv("OMP_NUM_THREADS");
  Outcome out = run_launcher(o, a, {}, "", /*restart_count=*/2);
  REQUIRE(out.result.value("success", false));
  CHECK(out.result["exit_code"] == 0);
  for (int lr = 0; lr < 2; ++lr) {
    auto env = parse_env(read_file(dir / ("env_" + std::to_string(lr))));
    CAPTURE(lr);
    CHECK(env["RANK"] == std::to_string(3 + lr));
    CHECK(env["LOCAL_RANK"] == std::to_string(lr));
    CHECK(env["WORLD_SIZE"] == "5");
    CHECK(env["LOCAL_WORLD_SIZE"] == "2");
    CHECK(env["GROUP_RANK"] == "1");
    CHECK(env["GROUP_WORLD_SIZE"] == "2");
    CHECK(env["ROLE_NAME"] == "trainer");
    CHECK(env["ROLE_RANK"] == std::to_string(3 + lr));
    CHECK(env["ROLE_WORLD_SIZE"] == "5");
    CHECK(env["MASTER_ADDR"] == "10.1.2.3");
    CHECK(env["MASTER_PORT"] == "29777");
    CHECK(env["TORCHELASTIC_RESTART_COUNT"] == "2");
    CHECK(env["TORCHELASTIC_MAX_RESTARTS"] == "3");
    CHECK(env["TORCHELASTIC_RUN_ID"] == "job-42");
    CHECK(env["TORCHELASTIC_USE_AGENT_STORE"] == "False");
    CHECK(env["TORCHELASTIC_ERROR_FILE"].find("rank_" + std::to_string(3 + lr)) != std::string::npos);
    CHECK(env["OMP_NUM_THREADS"] == "1");
    CHECK(env["DDP_STORE"] == "10.1.2.3:29400");
    CHECK(env["DDP_JOB_TOKEN"] == "s3cret");
    CHECK(env["DDP_RUN_ID"] == "job-42");
    CHECK(env["DDP_NODE_RANK"] == "1");
    CHECK(env["FOO"] == "bar");
    CHECK(env.count("PATH") == 1);  // the launcher's own environment is inherited
  }
}

TEST_CASE("all workers succeed: exit code 0") {
  LaunchOptions o;
  o.command = {"true"};  // found on PATH
  Outcome out = run_launcher(o, single_node(3));
  CHECK(out.result["success"] == true);
  CHECK(out.result["exit_code"] == 0);
  CHECK(out.result["failures"].empty());
}

TEST_CASE("a worker's exit code is the job's, and the other workers are stopped") {
  TempDir dir;
  // Rank 1 fails; rank 0 would run for 1000 s unless stopped, and records the SIGTERM.
  LaunchOptions o = sh_options("if [ $RANK = 1 ]; then while [ ! -e " + dir.path() +
                                   "/ready0 ]; do sleep 0.01; done; exit 3; fi; "
                                   "trap 'echo term > " +
                                   dir.path() + "/term0; exit 0' TERM; touch " + dir.path() +
                                   "/ready0; "
                                   "sleep 1000 & wait",
                               2);
  Outcome out = run_launcher(o, single_node(2));
  CHECK(out.result["success"] == false);
  CHECK(out.result["exit_code"] == 3);
  REQUIRE(out.result["failures"].size() == 1);
  CHECK(out.result["failures"][0]["rank"] == 1);
  CHECK(out.result["failures"][0]["local_rank"] == 1);
  CHECK(out.result["failures"][0]["exit_code"] == 3);
  CHECK(out.result["failures"][0]["signal"] == 0);
  CHECK(out.result["failures"][0]["pid"].get<int>() > 0);
  CHECK(!out.result["failures"][0]["host"].get<std::string>().empty());
  CHECK(read_file(dir / "term0") == "term\n");  // stopped by SIGTERM within the grace
  std::string summary = out.result["summary"];
  CHECK(summary.find("Root Cause") != std::string::npos);
  CHECK(summary.find("rank      : 1 (local_rank: 1)") != std::string::npos);
  CHECK(summary.find("exitcode  : 3") != std::string::npos);
}

TEST_CASE("a worker killed from outside: the rest are stopped, exit 128+9") {
  TempDir dir;
  const std::string d = dir.path();
  LaunchOptions o =
      sh_options("trap 'touch " + d + "/term_$RANK; exit 0' TERM; echo $$ > " + d + "/tmp_$RANK; mv " + d +
                     "/tmp_$RANK " + d + "/pid_$RANK; sleep 1000 & wait",
                 3);
  Outcome out = run_launcher(o, single_node(3), [&](pid_t) {
    REQUIRE(
        eventually([&] { return exists(dir / "pid_0") && exists(dir / "pid_1") && exists(dir / "pid_2"); }));
    ::kill(read_pid(dir / "pid_1"), SIGKILL);
  });
  CHECK(out.result["exit_code"] == 128 + 9);
  REQUIRE(out.result["failures"].size() == 1);
  CHECK(out.result["failures"][0]["rank"] == 1);
  CHECK(out.result["failures"][0]["signal"] == SIGKILL);
  CHECK(exists(dir / "term_0"));  // the others got SIGTERM (and obeyed within the grace)
  CHECK(exists(dir / "term_2"));
  CHECK_FALSE(exists(dir / "term_1"));
  CHECK(out.result["descendants_left"] == 0);
}

TEST_CASE("death by signal: exit code 128+N and the signal's name") {
  LaunchOptions o = sh_options("kill -9 $$");
  Outcome out = run_launcher(o, single_node(1));
  CHECK(out.result["exit_code"] == 128 + 9);
  REQUIRE(out.result["failures"].size() == 1);
  CHECK(out.result["failures"][0]["signal"] == 9);
  CHECK(out.result["summary"].get<std::string>().find("SIGKILL") != std::string::npos);
}

TEST_CASE("a worker that ignores SIGTERM is killed after the shutdown timeout") {
  TempDir dir;
  LaunchOptions o = sh_options("if [ $RANK = 1 ]; then while [ ! -e " + dir.path() +
                                   "/ready ]; do sleep 0.01; done; exit 5; fi; "
                                   "trap '' TERM; touch " +
                                   dir.path() + "/ready; sleep 1000",
                               2);
  o.shutdown_timeout = std::chrono::milliseconds(200);
  Outcome out = run_launcher(o, single_node(2));
  CHECK(out.result["exit_code"] == 5);
  REQUIRE(out.result["failures"].size() == 1);  // rank 0's SIGKILL is a consequence
  CHECK(out.result["failures"][0]["rank"] == 1);
  CHECK(out.result["descendants_left"] == 0);
}

TEST_CASE("exec failures: 127 not found, 126 not executable, with the errno in the summary") {
  SUBCASE("not found") {
    LaunchOptions o;
    o.command = {"./definitely-not-here-xyz"};
    Outcome out = run_launcher(o, single_node(1));
    CHECK(out.result["exit_code"] == 127);
    REQUIRE(out.result["failures"].size() == 1);
    CHECK(out.result["failures"][0]["message"] ==
          "exec ./definitely-not-here-xyz: No such file or directory");
    CHECK(out.result["summary"].get<std::string>().find("No such file or directory") != std::string::npos);
  }
  SUBCASE("not on PATH") {
    LaunchOptions o;
    o.command = {"no-such-program-xyz"};
    Outcome out = run_launcher(o, single_node(1));
    CHECK(out.result["exit_code"] == 127);
    CHECK(out.result["failures"][0]["message"] == "exec no-such-program-xyz: No such file or directory");
  }
  SUBCASE("not executable") {
    TempDir dir;
    std::ofstream(dir / "script") << "#!/bin/sh\nexit 0\n";
    ::chmod((dir / "script").c_str(), 0644);
    LaunchOptions o;
    o.command = {dir / "script"};
    Outcome out = run_launcher(o, single_node(1));
    CHECK(out.result["exit_code"] == 126);
    CHECK(out.result["failures"][0]["message"] == "exec " + (dir / "script") + ": Permission denied");
  }
}

TEST_CASE("no process of the job survives: grandchildren, daemons and orphans are killed") {
  TempDir dir;
  // Each worker leaves a background child in its group and a setsid daemon, then exits 0
  // (rank 0) or waits (rank 1) until rank 0 fails... rank 0 exits successfully here.
  const std::string d = dir.path();
  LaunchOptions o = sh_options("sleep 1000 & echo $! > " + d +
                                   "/bg_$RANK; "
                                   "setsid sleep 1000 & echo $! > " +
                                   d +
                                   "/daemon_$RANK; "
                                   "sh -c 'sleep 1000 & echo $! > " +
                                   d +
                                   "/orphan_$RANK' ; "
                                   "echo $$ > " +
                                   d + "/worker_$RANK",
                               2);
  Outcome out = run_launcher(o, single_node(2));
  CHECK(out.result["success"] == true);
  CHECK(out.result["descendants_left"] == 0);
  for (int r = 0; r < 2; ++r) {
    for (const char* what : {"bg_", "daemon_", "orphan_", "worker_"}) {
      std::string file = dir / (what + std::to_string(r));
      REQUIRE(exists(file));
      pid_t pid = read_pid(file);
      CAPTURE(file);
      CHECK(process_gone(pid));
    }
  }
}

TEST_CASE("no process survives a failing job either") {
  TempDir dir;
  const std::string d = dir.path();
  LaunchOptions o =
      sh_options("setsid sleep 1000 & echo $! > " + d + "/tmp_$RANK; mv " + d + "/tmp_$RANK " + d +
                     "/daemon_$RANK; "
                     "if [ $RANK = 0 ]; then while [ ! -e " +
                     d + "/daemon_1 ]; do sleep 0.01; done; exit 1; fi; sleep 1000",
                 2);
  Outcome out = run_launcher(o, single_node(2));
  CHECK(out.result["exit_code"] == 1);
  CHECK(out.result["descendants_left"] == 0);
  for (int r = 0; r < 2; ++r) CHECK(process_gone(read_pid(dir / ("daemon_" + std::to_string(r)))));
}

TEST_CASE("SIGINT is forwarded to every worker and the job exits 130") {
  TempDir dir;
  const std::string d = dir.path();
  LaunchOptions o = sh_options(
      "trap 'echo int > " + d + "/int_$RANK; exit 0' INT; touch " + d + "/ready_$RANK; sleep 1000 & wait", 3);
  Outcome out = run_launcher(o, single_node(3), [&](pid_t launcher) {
    REQUIRE(eventually(
        [&] { return exists(dir / "ready_0") && exists(dir / "ready_1") && exists(dir / "ready_2"); }));
    ::kill(launcher, SIGINT);
  });
  CHECK(out.result["interrupted_by"] == SIGINT);
  CHECK(out.result["exit_code"] == 130);
  CHECK(out.result["failures"].empty());
  for (int r = 0; r < 3; ++r) CHECK(read_file(dir / ("int_" + std::to_string(r))) == "int\n");
  CHECK(out.result["descendants_left"] == 0);
}

TEST_CASE("SIGTERM and SIGUSR1 are forwarded too: exit 128+N") {
  for (int sig : {SIGTERM, SIGUSR1}) {
    CAPTURE(sig);
    TempDir dir;
    const std::string d = dir.path();
    LaunchOptions o = sh_options("touch " + d + "/ready_$RANK; sleep 1000 & wait", 2);
    Outcome out = run_launcher(o, single_node(2), [&](pid_t launcher) {
      REQUIRE(eventually([&] { return exists(dir / "ready_0") && exists(dir / "ready_1"); }));
      ::kill(launcher, sig);
    });
    CHECK(out.result["interrupted_by"] == sig);
    CHECK(out.result["exit_code"] == 128 + sig);
  }
}

TEST_CASE("a second SIGINT kills workers that survive the first") {
  TempDir dir;
  const std::string d = dir.path();
  // The workers note the signal and carry on (their sleep dies, the loop starts another).
  LaunchOptions o = sh_options("trap 'touch " + d + "/int_$RANK' INT TERM; touch " + d +
                                   "/ready_$RANK; while :; do sleep 1000 & wait; done",
                               2);
  o.shutdown_timeout = std::chrono::milliseconds(600'000);  // only the escalation can end it
  Outcome out = run_launcher(o, single_node(2), [&](pid_t launcher) {
    REQUIRE(eventually([&] { return exists(dir / "ready_0") && exists(dir / "ready_1"); }));
    ::kill(launcher, SIGINT);
    // The second must arrive after the first was handled (pending signals coalesce).
    REQUIRE(eventually([&] { return exists(dir / "int_0") && exists(dir / "int_1"); }));
    ::kill(launcher, SIGINT);
  });
  CHECK(out.result["exit_code"] == 130);
  CHECK(out.result["interrupted_by"] == SIGINT);
  CHECK(out.result["descendants_left"] == 0);
}

TEST_CASE("the failure carries the head of the worker's error file") {
  SUBCASE("PyTorch @record format") {
    LaunchOptions o = sh_options(
        "printf '%s' '{\"message\": {\"message\": \"ValueError: boom\", \"extraInfo\": "
        "{\"py_callstack\": \"Traceback (most recent call last):\\n  File x.py\\nValueError: boom\", "
        "\"timestamp\": \"1700000000\"}}}' > $TORCHELASTIC_ERROR_FILE; exit 1");
    Outcome out = run_launcher(o, single_node(1));
    REQUIRE(out.result["failures"].size() == 1);
    std::string head = out.result["failures"][0]["error_head"];
    CHECK(head.find("Traceback (most recent call last):") == 0);
    CHECK(head.find("ValueError: boom") != std::string::npos);
    CHECK(out.result["summary"].get<std::string>().find("ValueError: boom") != std::string::npos);
  }
  SUBCASE("plain message") {
    LaunchOptions o = sh_options(
        "echo '{\"message\": \"disk full\", \"timestamp\": 5}' > $TORCHELASTIC_ERROR_FILE; exit 2");
    Outcome out = run_launcher(o, single_node(1));
    REQUIRE(out.result["failures"].size() == 1);
    CHECK(out.result["failures"][0]["error_head"] == "disk full");
  }
  SUBCASE("no error file") {
    Outcome out = run_launcher(sh_options("exit 2"), single_node(1));
    CHECK(out.result["failures"][0]["error_head"] == "");
  }
}

TEST_CASE("the owner stops the workers at a tick") {
  TempDir dir;
  LaunchOptions o = sh_options("touch " + dir.path() + "/ready_$RANK; sleep 1000", 2);
  o.monitor_interval = std::chrono::milliseconds(10);
  std::string ready = dir / "ready_1";
  Outcome out = run_launcher(o, single_node(2), {}, "", 0, [ready] { return exists(ready); });
  CHECK(out.result["stopped_externally"] == true);
  CHECK(out.result["success"] == false);
  CHECK(out.result["failures"].empty());
  CHECK(out.result["exit_code"] == 1);
}

TEST_CASE("wake_monitor reports a tick at once, not at the next monitor tick") {
  // A monitor_interval of an hour: only the wake can report a tick before the worker's
  // own exit (success, not stopped) 20 s later. In a forked launcher (the Supervisor owns signals).
  TempDir dir;
  LaunchOptions o = sh_options("touch " + dir.path() + "/ready; sleep 20", 1);
  o.monitor_interval = std::chrono::hours(1);
  const std::string ready = dir / "ready";
  std::cout.flush();
  std::fflush(nullptr);
  const pid_t child = ::fork();
  REQUIRE(child >= 0);
  if (child == 0) {
    int rc = 1;
    try {
      Supervisor supervisor(o);
      std::thread waker([&] {
        while (!exists(ready)) std::this_thread::sleep_for(std::chrono::milliseconds(5));
        supervisor.wake_monitor();  // as the heartbeat does on a loss
      });
      AttemptOptions attempt;
      attempt.monitor_interval = o.monitor_interval;
      supervisor.start(single_node(1), attempt);
      while (supervisor.next() == SupervisorEvent::kTick) {
        if (exists(ready)) supervisor.stop();
      }
      const AttemptResult r = supervisor.result();
      waker.join();
      rc = r.stopped_externally && r.failures.empty() ? 0 : 2;
    } catch (...) {
    }
    ::_exit(rc);
  }
  int status = 0;
  ::waitpid(child, &status, 0);
  CHECK(WIFEXITED(status));
  CHECK(WEXITSTATUS(status) == 0);  // 2: the worker ran to its end, the wake polled nothing
}

TEST_CASE("log files in torchrun's layout and [rank]: prefixed whole lines on the console") {
  TempDir dir;
  const std::string logs = dir / "logs";
  // Each line is written in two pieces, so unbuffered relaying would interleave mid-line.
  LaunchOptions o = sh_options(
      "i=0; while [ $i -lt 300 ]; do printf 'rank%s-' $RANK; printf 'line%s\\n' $i; i=$((i+1)); done; "
      "echo err-$RANK >&2; printf 'tail-no-newline-%s' $RANK",
      3);
  o.log_dir = logs;
  Outcome out = run_launcher(o, single_node(3, "logjob"), {}, dir / "console");
  REQUIRE(out.result["success"] == true);
  for (int r = 0; r < 3; ++r) {
    std::string base = logs + "/logjob/attempt_0/" + std::to_string(r);
    std::string stdout_log = read_file(base + "/stdout.log");
    CHECK(stdout_log.find("rank" + std::to_string(r) + "-line299\n") != std::string::npos);
    CHECK(stdout_log.find("[") == std::string::npos);  // files hold the raw output
    CHECK(read_file(base + "/stderr.log") == "err-" + std::to_string(r) + "\n");
  }
  std::istringstream console(out.console);
  std::string line;
  int lines = 0, tails = 0, errs = 0;
  while (std::getline(console, line)) {
    std::string rest;
    int r = prefix_rank(line, &rest);
    const std::string me = std::to_string(r);
    if (r >= 0 && rest.rfind("rank" + me + "-line", 0) == 0 && all_digits(rest.substr(10))) {
      ++lines;  // whole, and the prefix names the rank that wrote it
    } else if (r >= 0 && rest == "tail-no-newline-" + me) {
      ++tails;  // a partial last line is flushed, whole, at exit
    } else if (r >= 0 && rest == "err-" + me) {
      ++errs;
    } else {
      FAIL_CHECK("unexpected console line: ", line);
    }
  }
  CHECK(lines == 3 * 300);
  CHECK(tails == 3);
  CHECK(errs == 3);
}

TEST_CASE("redirects send output to files only; local_ranks_filter limits the console") {
  TempDir dir;
  const std::string logs = dir / "logs";
  LaunchOptions o = sh_options("echo out-$RANK; echo err-$RANK >&2", 3);
  o.log_dir = logs;
  o.redirects.all = 1;  // stdout to files only
  o.tee.all = 2;        // stderr to files and console
  o.local_ranks_filter = std::set<int>{0, 2};
  Outcome out = run_launcher(o, single_node(3, "rj"), {}, dir / "console");
  REQUIRE(out.result["success"] == true);
  for (int r = 0; r < 3; ++r) {
    std::string base = logs + "/rj/attempt_0/" + std::to_string(r);
    CHECK(read_file(base + "/stdout.log") == "out-" + std::to_string(r) + "\n");
    CHECK(read_file(base + "/stderr.log") == "err-" + std::to_string(r) + "\n");
  }
  CHECK(out.console.find("out-") == std::string::npos);
  CHECK(out.console.find("[default0]:err-0\n") != std::string::npos);  // torchrun's prefix
  CHECK(out.console.find("[default2]:err-2\n") != std::string::npos);
  CHECK(out.console.find("err-1") == std::string::npos);
}

TEST_CASE("without log options workers write straight to the launcher's console") {
  TempDir dir;
  Outcome out = run_launcher(sh_options("echo plain-$RANK", 2), single_node(2), {}, dir / "console");
  CHECK(out.console.find("plain-0\n") != std::string::npos);
  CHECK(out.console.find("plain-1\n") != std::string::npos);
  CHECK(out.console.find("]:") == std::string::npos);
}

TEST_CASE("the attempt number selects the log directory; the error file lives beside the logs") {
  TempDir dir;
  LaunchOptions o = sh_options(
      "echo $TORCHELASTIC_ERROR_FILE; echo '{\"message\": \"x\"}' > $TORCHELASTIC_ERROR_FILE; exit 4");
  o.log_dir = dir / "logs";
  Outcome out = run_launcher(o, single_node(1, "r"), {}, dir / "console", /*restart_count=*/1);
  std::string expected = dir / "logs/r/attempt_1/0/error.json";
  CHECK(out.result["failures"][0]["error_file"] == expected);
  CHECK(out.result["failures"][0]["error_head"] == "x");
  CHECK(read_file(dir / "logs/r/attempt_1/0/stdout.log") == expected + "\n");
}

TEST_CASE("cpu-bind cores gives each local rank its own disjoint CPUs") {
  TempDir dir;
  LaunchOptions o = sh_options(
      "grep Cpus_allowed_list /proc/self/status | cut -f2 > " + dir.path() + "/cpus_$LOCAL_RANK", 2);
  o.cpu_bind = CpuBind::kCores;
  Outcome out = run_launcher(o, single_node(2));
  REQUIRE(out.result["success"] == true);
  auto expected = cpu_assignment(CpuBind::kCores, 2);
  std::set<int> seen;
  for (int lr = 0; lr < 2; ++lr) {
    std::string got = read_file(dir / ("cpus_" + std::to_string(lr)));
    got.erase(got.find_last_not_of("\n") + 1);
    CHECK(got == format_cpu_list(expected[lr]));
    auto cpus = parse_cpu_list(got);
    CHECK(!cpus.empty());
    for (int c : cpus) seen.insert(c);
  }
  // Disjoint whenever the machine has a CPU per rank.
  if (std::thread::hardware_concurrency() >= 2) {
    CHECK(seen.size() == expected[0].size() + expected[1].size());
  }
}

TEST_CASE("queued signals are visible between attempts through poll_signal") {
  int fds[2];
  REQUIRE(::pipe(fds) == 0);
  pid_t child = ::fork();
  if (child == 0) {
    int got = -1;
    {
      Supervisor s(sh_options("true"));
      ::kill(::getpid(), SIGUSR2);
      got = s.poll_signal();
      if (s.poll_signal() != 0) got = -2;
    }
    ssize_t n = ::write(fds[1], &got, sizeof got);
    ::_exit(n == sizeof got ? 0 : 1);
  }
  ::close(fds[1]);
  int got = 0;
  CHECK(::read(fds[0], &got, sizeof got) == sizeof got);
  ::close(fds[0]);
  int status = 0;
  ::waitpid(child, &status, 0);
  CHECK(got == SIGUSR2);
  CHECK(WIFEXITED(status));
}

TEST_CASE(
    "log_run_dir names the directory under log_dir (run id 'none' gets one of its own); the run id stays") {
  TempDir dir;
  const std::string logs = dir / "logs";
  LaunchOptions o = sh_options("echo out-$RANK; echo run=$TORCHELASTIC_RUN_ID", 1);
  o.log_dir = logs;
  o.log_run_dir = "none_1a2b";
  Outcome out = run_launcher(o, single_node(1, "none"), {}, dir / "console");
  REQUIRE(out.result["success"] == true);
  CHECK(read_file(logs + "/none_1a2b/attempt_0/0/stdout.log") == "out-0\nrun=none\n");
  CHECK_FALSE(std::filesystem::exists(logs + "/none"));
}
