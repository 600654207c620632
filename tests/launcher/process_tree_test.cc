#include "launcher/process_tree.h"

#include <doctest/doctest.h>
#include <errno.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdint>

#include "launcher_test_util.h"

using namespace ddp::launcher;
using namespace ddp::launcher::test;

TEST_CASE("descendants are found, and kill_all_descendants leaves none, orphans included") {
  TempDir dir;
  // In a forked child: becoming a subreaper and killing every descendant must not touch the
  // test runner.
  int fds[2];
  REQUIRE(::pipe(fds) == 0);
  pid_t child = ::fork();
  if (child == 0) {
    ::close(fds[0]);
    become_subreaper();
    // A shell that starts a grandchild and a setsid daemon, then exits: both re-parent to us.
    std::string cmd =
        "sleep 1000 & echo $! > " + (dir / "a") + "; setsid sleep 1000 & echo $! > " + (dir / "b");
    pid_t sh = ::fork();
    if (sh == 0) {
      ::execl("/bin/sh", "sh", "-c", cmd.c_str(), static_cast<char*>(nullptr));
      ::_exit(127);
    }
    ::waitpid(sh, nullptr, 0);
    int found = static_cast<int>(descendants(::getpid()).size());  // the two orphans
    int killed = kill_all_descendants();
    int left = static_cast<int>(descendants(::getpid()).size());
    int report[3] = {found, killed, left};
    ssize_t n = ::write(fds[1], report, sizeof report);
    ::_exit(n == sizeof report ? 0 : 1);
  }
  ::close(fds[1]);
  int report[3] = {-1, -1, -1};
  CHECK(::read(fds[0], report, sizeof report) == sizeof report);
  ::close(fds[0]);
  ::waitpid(child, nullptr, 0);
  CHECK(report[0] == 2);
  CHECK(report[1] >= 2);
  CHECK(report[2] == 0);
  CHECK(process_gone(static_cast<pid_t>(std::stol(read_file(dir / "a")))));
  CHECK(process_gone(static_cast<pid_t>(std::stol(read_file(dir / "b")))));
}

namespace {

// Forks a child that runs `body` and then exits 0.
template <typename Body>
pid_t fork_running(Body body) {
  pid_t pid = ::fork();
  if (pid == 0) {
    body();
    ::_exit(0);
  }
  return pid;
}

// Ends the process once the pipe `fd` is closed at its other end (the test has looked).
void* exit_when_closed(void* fd) {
  char c;
  ssize_t n;
  do {
    n = ::read(static_cast<int>(reinterpret_cast<intptr_t>(fd)), &c, 1);
  } while (n > 0 || (n < 0 && errno == EINTR));
  ::_exit(0);
}

}  // namespace

TEST_CASE("is_exiting: a zombie is, a live process is not, nor one whose main thread alone has exited") {
  CHECK_FALSE(is_exiting(::getpid()));

  pid_t sleeper = fork_running([] { ::pause(); });
  CHECK_FALSE(is_exiting(sleeper));
  ::kill(sleeper, SIGKILL);
  // A zombie until reaped: wait for it without reaping (WNOWAIT), then it reads as exiting.
  siginfo_t info{};
  REQUIRE(::waitid(P_PID, static_cast<id_t>(sleeper), &info, WEXITED | WNOWAIT) == 0);
  CHECK(is_exiting(sleeper));
  ::waitpid(sleeper, nullptr, 0);
  CHECK_FALSE(is_exiting(sleeper));  // reaped: no longer in /proc

  // The main thread exits while another keeps the process alive (until the test closes `gate`):
  // not a dying process.
  int gate[2];
  REQUIRE(::pipe(gate) == 0);
  pid_t half = fork_running([&] {
    ::close(gate[1]);
    pthread_t thread;
    void* fd = reinterpret_cast<void*>(static_cast<intptr_t>(gate[0]));
    // SYS_exit ends only the calling thread, without pthread_exit's unwinding through doctest.
    if (::pthread_create(&thread, nullptr, exit_when_closed, fd) == 0) ::syscall(SYS_exit, 0);
  });
  ::close(gate[0]);
  CHECK(eventually(
      [&] { return read_file("/proc/" + std::to_string(half) + "/stat").find(") Z") != std::string::npos; }));
  CHECK_FALSE(is_exiting(half));
  ::close(gate[1]);
  int status = 0;
  ::waitpid(half, &status, 0);
  CHECK(WIFEXITED(status));
}
