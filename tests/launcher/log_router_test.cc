#include "launcher/log_router.h"

#include <doctest/doctest.h>
#include <fcntl.h>

#include "launcher_test_util.h"

using namespace ddp;
using namespace ddp::launcher;
using namespace ddp::launcher::test;

TEST_CASE("routes: torchrun's redirects/tee per local rank") {
  LaunchOptions o;
  auto plain = plan_routes(o, 0, "/w");
  CHECK_FALSE(plain.out.relay);  // no log options: inherit the console
  CHECK(plain.out.console);
  CHECK(plain.out.file.empty());

  o.log_dir = "/logs";
  auto logged = plan_routes(o, 0, "/w");  // log dir alone: tee everything
  CHECK(logged.out.file == "/w/stdout.log");
  CHECK(logged.err.file == "/w/stderr.log");
  CHECK(logged.out.console);
  CHECK(logged.out.relay);

  o.redirects.all = 3;
  o.tee.per_rank[1] = 1;
  auto r0 = plan_routes(o, 0, "/w");
  CHECK(r0.out.file == "/w/stdout.log");
  CHECK_FALSE(r0.out.console);
  CHECK_FALSE(r0.out.relay);  // file only: the worker writes it directly
  auto r1 = plan_routes(o, 1, "/w");
  CHECK(r1.out.console);
  CHECK(r1.out.relay);
  CHECK_FALSE(r1.err.console);

  LaunchOptions f;
  f.local_ranks_filter = std::set<int>{1};
  CHECK_FALSE(plan_routes(f, 0, "/w").out.console);
  CHECK(plan_routes(f, 1, "/w").out.relay);  // prefixed
}

TEST_CASE("the relay writes whole prefixed lines, joins pieces, flushes the tail") {
  TempDir dir;
  int p[2];
  REQUIRE(::pipe2(p, O_CLOEXEC) == 0);
  Fd console(::open((dir / "console").c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644));
  OutputRelay relay{Fd(p[0]), open_log_file(dir / "file"), console.get(), "[7]:"};
  Fd writer(p[1]);
  auto put = [&](const std::string& s) { REQUIRE(::write(writer.get(), s.data(), s.size()) == static_cast<ssize_t>(s.size())); };
  put("hel");
  CHECK(relay.pump());
  CHECK(read_file(dir / "console").empty());  // a partial line waits
  put("lo\nwor");
  CHECK(relay.pump());
  put("ld\nta");
  CHECK(relay.pump());
  put("il");
  writer.reset();
  relay.finish();
  CHECK_FALSE(relay.open());
  CHECK(read_file(dir / "console") == "[7]:hello\n[7]:world\n[7]:tail\n");
  CHECK(read_file(dir / "file") == "hello\nworld\ntail");
}

TEST_CASE("an endless line is cut at kMaxLine, not held without bound") {
  TempDir dir;
  int p[2];
  REQUIRE(::pipe2(p, O_CLOEXEC) == 0);
  Fd console(::open((dir / "console").c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644));
  OutputRelay relay{Fd(p[0]), Fd(), console.get(), "[0]:"};
  Fd writer(p[1]);
  std::string big(OutputRelay::kMaxLine + 10, 'x');
  size_t off = 0;
  while (off < big.size()) {
    ssize_t n = ::write(writer.get(), big.data() + off, std::min<size_t>(4096, big.size() - off));
    REQUIRE(n > 0);
    off += static_cast<size_t>(n);
    relay.pump();
  }
  writer.reset();
  relay.finish();
  std::string text = read_file(dir / "console");
  CHECK(text == "[0]:" + std::string(OutputRelay::kMaxLine, 'x') + "\n[0]:" + std::string(10, 'x') + "\n");
  CHECK(attempt_log_dir("/l", "job", 2) == "/l/job/attempt_2");
}
