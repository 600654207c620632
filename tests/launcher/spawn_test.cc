#include "launcher/spawn.h"

#include <doctest/doctest.h>
#include <fcntl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "launcher_test_util.h"

using namespace ddp;
using namespace ddp::launcher;
using namespace ddp::launcher::test;

namespace {
int wait_status(pid_t pid) {
  int status = 0;
  ::waitpid(pid, &status, 0);
  return status;
}
SpawnOptions sh(const std::string& script) {
  SpawnOptions o;
  o.path = "/bin/sh";
  o.argv = {"sh", "-c", script};
  o.env = {"PATH=/usr/bin:/bin", "HELLO=world"};
  sigemptyset(&o.sigmask);
  return o;
}
}  // namespace

TEST_CASE("resolve_executable searches PATH like execvp") {
  CHECK(resolve_executable("./x") == "./x");
  CHECK(resolve_executable("/bin/true") == "/bin/true");
  std::string sh_path = resolve_executable("sh");
  CHECK(sh_path.find('/') != std::string::npos);
  CHECK(resolve_executable("no-such-program-xyz") == "no-such-program-xyz");
}

TEST_CASE("the child gets the given environment, its own session and process group, and stdout") {
  TempDir dir;
  Fd out(::open((dir / "out").c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644));
  SpawnOptions o = sh("echo $HELLO; ps -o pgid= -p $$ | tr -d ' '; echo $$; ps -o sid= -p $$ | tr -d ' '");
  o.stdout_fd = out.get();
  Spawned s = spawn_process(o);
  int status = wait_status(s.pid);
  CHECK(WIFEXITED(status));
  CHECK(WEXITSTATUS(status) == 0);
  CHECK_FALSE(read_exec_error(s.exec_status.get(), o.path).has_value());
  std::istringstream lines(read_file(dir / "out"));
  std::string hello, pgid, pid, sid;
  lines >> hello >> pgid >> pid >> sid;
  CHECK(hello == "world");
  CHECK(pgid == pid);  // a group of its own, led by the worker
  CHECK(pgid == std::to_string(s.pid));
  CHECK(sid == pid);  // and a session of its own: no terminal job control stops it
}

// glibc's sigaction refuses its reserved signals (32, 33); a parent that is not a glibc
// program can still leave them ignored, so the test does it the same way.
struct KernelSigaction {
  void (*handler)(int);
  unsigned long flags;
  void (*restorer)();
  unsigned long mask;
};
constexpr int kGlibcReserved = 32;

TEST_CASE("signal mask and ignored signals are reset in the child") {
  TempDir dir;
  // Block SIGUSR1 and ignore SIGHUP and signal 32 here; the child must see none of them.
  KernelSigaction ign32{}, old32{};
  ign32.handler = SIG_IGN;
  REQUIRE(::syscall(SYS_rt_sigaction, kGlibcReserved, &ign32, &old32, sizeof ign32.mask) == 0);
  sigset_t block, old;
  sigemptyset(&block);
  sigaddset(&block, SIGUSR1);
  ::pthread_sigmask(SIG_BLOCK, &block, &old);
  struct sigaction ign {
  }, old_hup{};
  ign.sa_handler = SIG_IGN;
  ::sigaction(SIGHUP, &ign, &old_hup);
  Fd out(::open((dir / "out").c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644));
  SpawnOptions o = sh("grep -E '^(SigBlk|SigIgn)' /proc/self/status");
  o.stdout_fd = out.get();
  o.sigmask = old;
  Spawned s = spawn_process(o);
  wait_status(s.pid);
  ::sigaction(SIGHUP, &old_hup, nullptr);
  ::syscall(SYS_rt_sigaction, kGlibcReserved, &old32, nullptr, sizeof old32.mask);
  ::pthread_sigmask(SIG_SETMASK, &old, nullptr);
  std::string text = read_file(dir / "out");
  CHECK(text.find("SigBlk:\t0000000000000000") != std::string::npos);
  CHECK(text.find("SigIgn:\t0000000000000000") != std::string::npos);
}

TEST_CASE("exec failure: 127 and ENOENT, 126 and EACCES, reported through the pipe") {
  SpawnOptions o = sh("");
  o.path = "/nonexistent/prog";
  o.argv = {"/nonexistent/prog"};
  Spawned s = spawn_process(o);
  int status = wait_status(s.pid);
  CHECK(WEXITSTATUS(status) == 127);
  CHECK(read_exec_error(s.exec_status.get(), "prog") ==
        std::optional<std::string>("exec prog: No such file or directory"));

  TempDir dir;
  std::ofstream(dir / "noexec") << "#!/bin/sh\n";
  o.path = dir / "noexec";
  Spawned s2 = spawn_process(o);
  CHECK(WEXITSTATUS(wait_status(s2.pid)) == 126);
  CHECK(read_exec_error(s2.exec_status.get(), "x") ==
        std::optional<std::string>("exec x: Permission denied"));
}

TEST_CASE("cpu affinity is applied before exec") {
  TempDir dir;
  cpu_set_t allowed;
  REQUIRE(::sched_getaffinity(0, sizeof allowed, &allowed) == 0);
  int first = 0;
  while (!CPU_ISSET(first, &allowed)) ++first;
  cpu_set_t one;
  CPU_ZERO(&one);
  CPU_SET(first, &one);
  Fd out(::open((dir / "out").c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644));
  SpawnOptions o = sh("grep Cpus_allowed_list /proc/self/status | cut -f2");
  o.stdout_fd = out.get();
  o.cpus = one;
  Spawned s = spawn_process(o);
  wait_status(s.pid);
  CHECK(read_file(dir / "out") == std::to_string(first) + "\n");
}
