#include "launcher/log_router.h"

#include <doctest/doctest.h>
#include <fcntl.h>

#include "common/error.h"
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
  ConsoleSink sink(console.get(), "stdout");
  OutputRelay relay{Fd(p[0]), open_log_file(dir / "file"), &sink, "[7]:"};
  Fd writer(p[1]);
  auto put = [&](const std::string& s) {
    REQUIRE(::write(writer.get(), s.data(), s.size()) == static_cast<ssize_t>(s.size()));
  };
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
  ConsoleSink sink(console.get(), "stdout");
  OutputRelay relay{Fd(p[0]), Fd(), &sink, "[0]:"};
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

TEST_CASE("log files: always new, never through a symlink, 0640; worker dirs fresh, 0750") {
  TempDir dir;
  const mode_t old_umask = ::umask(022);  // the modes asked for, not the test runner's umask
  std::ofstream(dir / "precious") << "keep me";
  // An existing file is refused, not truncated; a symlink is refused, not followed.
  std::ofstream(dir / "existing.log") << "old";
  CHECK_THROWS_WITH_AS(open_log_file(dir / "existing.log"), doctest::Contains("exists already"), SystemError);
  CHECK(read_file(dir / "existing.log") == "old");
  REQUIRE(::symlink((dir / "precious").c_str(), (dir / "link.log").c_str()) == 0);
  CHECK_THROWS_AS(open_log_file(dir / "link.log"), SystemError);
  CHECK(read_file(dir / "precious") == "keep me");
  {
    Fd fd = open_log_file(dir / "new.log");
    struct stat st {};
    REQUIRE(::fstat(fd.get(), &st) == 0);
    CHECK((st.st_mode & 0777) == 0640);
  }

  const std::string logs = dir / "logs";
  make_worker_dir(logs, logs + "/job/attempt_0/0");
  make_worker_dir(logs, logs + "/job/attempt_0/1");  // a second rank shares the attempt dir
  struct stat st {};
  REQUIRE(::stat((logs + "/job/attempt_0/0").c_str(), &st) == 0);
  CHECK((st.st_mode & 0777) == 0750);
  // The same rank again: another job with this run id wrote here.
  CHECK_THROWS_WITH_AS(make_worker_dir(logs, logs + "/job/attempt_0/0"), doctest::Contains("exists already"),
                       SystemError);
  // A symlink planted for a level below the log dir is refused.
  std::filesystem::create_directory(dir / "elsewhere");
  REQUIRE(::symlink((dir / "elsewhere").c_str(), (logs + "/job/attempt_1").c_str()) == 0);
  CHECK_THROWS_WITH_AS(make_worker_dir(logs, logs + "/job/attempt_1/0"), doctest::Contains("not a directory"),
                       SystemError);
  CHECK(std::filesystem::is_empty(dir / "elsewhere"));
  ::umask(old_umask);
}
