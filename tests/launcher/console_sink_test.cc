// ConsoleSink: never blocks on a console that stops reading; buffers whole chunks up to a
// bound, drops and counts the rest; leaves the shared file description blocking.
#include "launcher/console_sink.h"

#include <doctest/doctest.h>
#include <fcntl.h>
#include <sys/socket.h>

#include "launcher_test_util.h"

using namespace ddp;
using namespace ddp::launcher;
using namespace ddp::launcher::test;

namespace {

std::string read_all(int fd) {
  std::string out;
  char buf[65536];
  ssize_t n;
  while ((n = ::read(fd, buf, sizeof buf)) > 0) out.append(buf, static_cast<size_t>(n));
  return out;
}

}  // namespace

TEST_CASE("a pipe nobody reads: writes return at once, the overflow is dropped whole and counted") {
  int p[2];
  REQUIRE(::pipe2(p, O_CLOEXEC) == 0);
  Fd reader(p[0]), writer(p[1]);
  ConsoleSink sink(writer.get(), "stdout", /*max_buffer=*/100'000);
  const std::string chunk(10'000, 'x');
  // A 64 KiB pipe plus a 100 KB buffer: 1 MB of chunks would block a plain write forever.
  for (int i = 0; i < 100; ++i) sink.write(chunk);
  CHECK(sink.pending());
  CHECK(sink.poll_fd() >= 0);
  CHECK(sink.dropped() > 0);
  CHECK(sink.dropped() % chunk.size() == 0);  // whole chunks only: lines are never cut
  // The shared description stays blocking for everyone else (the shell, a pipeline).
  CHECK((::fcntl(writer.get(), F_GETFL) & O_NONBLOCK) == 0);
  CHECK(sink.dropped_message() == "ddp-launch: warning: dropped " + std::to_string(sink.dropped()) +
                                      " bytes of worker output: stdout blocked\n");

  // Nobody reads: drain gives up after the stall and counts what it held.
  const uint64_t before = sink.dropped();
  sink.drain(Millis(50));
  CHECK_FALSE(sink.pending());
  CHECK(sink.dropped() > before);

  // A reader that comes back gets whole chunks, in order.
  ::fcntl(reader.get(), F_SETFL, O_NONBLOCK);
  CHECK(read_all(reader.get()).find_first_not_of('x') == std::string::npos);
  sink.write("hello\n");
  writer.reset();  // the sink wrote through its own description: still open
  sink.write("world\n");
  sink.drain(Millis(1000));
  CHECK(read_all(reader.get()) == "hello\nworld\n");
}

TEST_CASE("a reader that drains slowly gets everything once it reads; buffered bytes keep their order") {
  int p[2];
  REQUIRE(::pipe2(p, O_CLOEXEC) == 0);
  Fd reader(p[0]), writer(p[1]);
  ConsoleSink sink(writer.get(), "stderr");
  std::string expected;
  for (int i = 0; i < 2000; ++i) {
    std::string line = "line " + std::to_string(i) + std::string(100, '.') + "\n";
    expected += line;
    sink.write(line);
  }
  CHECK(sink.pending());  // 200 KB > the pipe
  CHECK(sink.dropped() == 0);
  std::string got;
  ::fcntl(reader.get(), F_SETFL, O_NONBLOCK);
  while (sink.pending() || got.size() < expected.size()) {
    char buf[4096];
    ssize_t n = ::read(reader.get(), buf, sizeof buf);
    if (n > 0) got.append(buf, static_cast<size_t>(n));
    sink.flush();
  }
  CHECK(got == expected);
}

TEST_CASE("a console that went away (EPIPE) and a socket console") {
  int p[2];
  REQUIRE(::pipe2(p, O_CLOEXEC) == 0);
  Fd writer(p[1]);
  ::close(p[0]);
  ::signal(SIGPIPE, SIG_IGN);
  ConsoleSink gone(writer.get(), "stdout");
  gone.write("lost\n");
  CHECK(gone.dropped() == 5);
  CHECK(gone.dropped_message().ends_with("stdout closed\n"));

  int sv[2];
  REQUIRE(::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) == 0);
  Fd a(sv[0]), b(sv[1]);
  ConsoleSink sock(a.get(), "stdout", 1000);
  for (int i = 0; i < 10000; ++i) sock.write(std::string(100, 's'));  // never blocks
  CHECK(sock.dropped() > 0);
  CHECK((::fcntl(a.get(), F_GETFL) & O_NONBLOCK) == 0);
}

TEST_CASE("a regular file takes everything") {
  TempDir dir;
  Fd file(::open((dir / "out").c_str(), O_WRONLY | O_CREAT | O_CLOEXEC, 0600));
  ConsoleSink sink(file.get(), "stdout");
  for (int i = 0; i < 100; ++i) sink.write(std::string(100'000, 'f'));
  CHECK_FALSE(sink.pending());
  CHECK(sink.dropped() == 0);
  CHECK(sink.poll_fd() == -1);
  CHECK(read_file(dir / "out").size() == 10'000'000);
}
