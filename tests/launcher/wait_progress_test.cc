#include "launcher/wait_progress.h"

#include <doctest/doctest.h>
#include <fcntl.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common/fd.h"
#include "launcher/stderr_sink.h"

using namespace ddp;
using namespace ddp::launcher;

namespace {

rdzv::NodeRendezvousProgress waiting() {
  rdzv::NodeRendezvousProgress p;
  p.run_id = "job7";
  p.nnodes = 6;
  p.count = 2;
  p.arrived = {{0, "h0"}, {4, "h4"}};
  p.missing = {1, 2, 3, 5};
  p.waited = Millis(12'400);
  p.timeout = Millis(900'000);
  return p;
}

}  // namespace

TEST_CASE("names who arrived and who is awaited, with the time waited") {
  CHECK(format_progress(waiting()) ==
        "waiting for nodes (run 'job7', round 0, 12 s of 900 s): 2 of 6 arrived (h0 = node 0, h4 = node 4); "
        "awaiting node rank(s) 1-3,5");
}

TEST_CASE("long lists are shortened") {
  auto p = waiting();
  p.nnodes = 20;
  p.arrived.clear();
  for (int i = 0; i < 12; ++i) p.arrived.emplace_back(i, std::string("h").append(std::to_string(i)));
  p.count = 12;
  p.missing = {12, 13, 14, 15, 16, 17, 18, 19};
  const std::string s = format_progress(p);
  CHECK(s.find("h7 = node 7, and 4 more)") != std::string::npos);
  CHECK(s.find("h8") == std::string::npos);
  CHECK(s.find("awaiting node rank(s) 12-19") != std::string::npos);
}

TEST_CASE("a large job's report counts the nodes, with the missing ranks when they go by arrival") {
  rdzv::NodeRendezvousProgress p = waiting();
  p.nnodes = 512;
  p.count = 300;
  p.arrived.clear();
  p.missing.clear();
  CHECK(format_progress(p) == "waiting for nodes (run 'job7', round 0, 12 s of 900 s): 300 of 512 arrived");
  for (int r = 300; r < 512; ++r) p.missing.push_back(r);
  CHECK(format_progress(p) ==
        "waiting for nodes (run 'job7', round 0, 12 s of 900 s): 300 of 512 arrived; awaiting node rank(s) "
        "300-511");
}

TEST_CASE("a terminal gets one line rewritten in place; anything else a line per report") {
  std::string out;
  const auto to_out = [&out](std::string_view text) { out.append(text); };
  {
    ProgressLine tty(true, to_out);
    tty.show(waiting());
    tty.show(waiting());
  }  // the destructor ends the line
  {
    ProgressLine log(false, to_out);
    log.show(waiting());
    log.finish();
  }
  std::string line = "ddp-launch: ";
  line.append(format_progress(waiting()));
  std::string expected;
  expected.append("\r\x1b[K")
      .append(line)
      .append("\r\x1b[K")
      .append(line)
      .append("\n")
      .append(line)
      .append("\n");
  CHECK(out == expected);
}

// The launcher's progress line used to write(2) to stderr itself: a stderr nobody reads (a full
// pipe) blocked the rendezvous wait, Ctrl-C included. By default it goes through the launcher's
// stderr sink. In a child process: it owns fd 2 and the installed sink; it reports whether
// every show() returned (an alarm kills it if one blocks).
TEST_CASE("by default the progress goes through the stderr sink: a stderr nobody reads does not block it") {
  int p[2];
  REQUIRE(::pipe2(p, O_CLOEXEC) == 0);
  Fd reader(p[0]), writer(p[1]);
  const pid_t child = ::fork();
  REQUIRE(child >= 0);
  if (child == 0) {
    ::alarm(20);
    ::dup2(writer.get(), STDERR_FILENO);
    const std::string filler(4096, 'x');
    ::fcntl(STDERR_FILENO, F_SETFL, O_NONBLOCK);
    while (::write(STDERR_FILENO, filler.data(), filler.size()) > 0) {
    }                                    // the pipe is full
    ::fcntl(STDERR_FILENO, F_SETFL, 0);  // blocking again, as a console normally is
    auto sink = install_stderr_sink();
    ProgressLine line(false);
    for (int i = 0; i < 10'000; ++i) line.show(waiting());  // ~1.3 MB: past the sink's 1 MiB
    ::_exit(sink->dropped() > 0 ? 0 : 1);  // the overflow was dropped and counted by the sink
  }
  int status = 0;
  REQUIRE(::waitpid(child, &status, 0) == child);
  CHECK_MESSAGE(WIFEXITED(status), "the progress line blocked on a full stderr (killed by signal ",
                WIFSIGNALED(status) ? WTERMSIG(status) : 0, ")");
  CHECK(WEXITSTATUS(status) == 0);
}
