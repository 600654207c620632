#include "launcher/wait_progress.h"

#include <doctest/doctest.h>
#include <unistd.h>

#include "common/fd.h"

using namespace ddp;
using namespace ddp::launcher;

namespace {

rdzv::NodeRendezvousProgress waiting() {
  rdzv::NodeRendezvousProgress p;
  p.run_id = "job7";
  p.nnodes = 6;
  p.arrived = {{0, "h0"}, {4, "h4"}};
  p.missing = {1, 2, 3, 5};
  p.waited = Millis(12'400);
  p.timeout = Millis(900'000);
  return p;
}

std::string drain(int fd) {
  std::string out;
  char buf[4096];
  ssize_t n;
  while ((n = ::read(fd, buf, sizeof buf)) > 0) out.append(buf, static_cast<size_t>(n));
  return out;
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
  p.missing = {12, 13, 14, 15, 16, 17, 18, 19};
  const std::string s = format_progress(p);
  CHECK(s.find("h7 = node 7, and 4 more)") != std::string::npos);
  CHECK(s.find("h8") == std::string::npos);
  CHECK(s.find("awaiting node rank(s) 12-19") != std::string::npos);
}

TEST_CASE("a terminal gets one line rewritten in place; anything else a line per report") {
  int fds[2];
  REQUIRE(::pipe(fds) == 0);
  Fd r(fds[0]), w(fds[1]);
  {
    ProgressLine tty(w.get(), true);
    tty.show(waiting());
    tty.show(waiting());
  }  // the destructor ends the line
  {
    ProgressLine log(w.get(), false);
    log.show(waiting());
    log.finish();
  }
  w.reset();
  const std::string out = drain(r.get());
  std::string line = "ddp-launch: ";
  line.append(format_progress(waiting()));
  std::string expected;
  expected.append("\r\x1b[K").append(line).append("\r\x1b[K").append(line).append("\n").append(line).append("\n");
  CHECK(out == expected);
}
