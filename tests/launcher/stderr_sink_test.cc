// StderrSink: the launcher's own log lines and messages never block on a stderr nobody reads;
// what does not fit is dropped and counted; a reader gets whole lines in order.
#include "launcher/stderr_sink.h"

#include <doctest/doctest.h>
#include <fcntl.h>
#include <spdlog/spdlog.h>
#include <unistd.h>

#include "common/fd.h"

using namespace ddp;
using namespace ddp::launcher;

namespace {

std::string read_all(int fd) {
  std::string out;
  char buf[65536];
  ssize_t n;
  while ((n = ::read(fd, buf, sizeof buf)) > 0) out.append(buf, static_cast<size_t>(n));
  return out;
}

}  // namespace

TEST_CASE("log lines to a pipe nobody reads return at once; the overflow is counted and said at the end") {
  int p[2];
  REQUIRE(::pipe2(p, O_CLOEXEC) == 0);
  Fd reader(p[0]), writer(p[1]);
  auto sink = std::make_shared<StderrSink>(writer.get(), /*max_buffer=*/100'000);
  spdlog::logger lg("ddp.test", sink);
  lg.set_pattern("%v");
  // 64 KiB of pipe plus 100 KB of buffer: 2 MB of lines would block a plain write forever.
  const std::string line(1000, 'x');
  for (int i = 0; i < 2000; ++i) lg.info(line);
  sink->write_text("a summary\n");
  CHECK(sink->dropped() > 0);
  CHECK((::fcntl(writer.get(), F_GETFL) & O_NONBLOCK) == 0);  // the shared description untouched
  sink->drain(Millis(50));
  // A reader that comes back finds the lines the pipe took, nothing interleaved (the last one
  // may be cut where the pipe was full when the rest was dropped).
  ::fcntl(reader.get(), F_SETFL, O_NONBLOCK);
  const std::string got = read_all(reader.get());
  CHECK(got.size() >= line.size() + 1);
  CHECK(got.substr(0, line.size() + 1) == line + "\n");
  CHECK(got.find_first_not_of("x\n") == std::string::npos);
}

TEST_CASE("a stderr that reads gets every line and message in order") {
  int p[2];
  REQUIRE(::pipe2(p, O_CLOEXEC) == 0);
  Fd reader(p[0]), writer(p[1]);
  auto sink = std::make_shared<StderrSink>(writer.get());
  spdlog::logger lg("ddp.test2", sink);
  lg.set_pattern("[%l] %v");
  lg.warn("first");
  sink->write_text("summary\n");
  lg.info("second");
  sink->drain(Millis(1000));
  CHECK(sink->dropped() == 0);
  writer.reset();
  lg.sinks().clear();
  sink.reset();  // its own description of the pipe closes: the reader sees the end
  CHECK(read_all(reader.get()) == "[warning] first\nsummary\n[info] second\n");
}
