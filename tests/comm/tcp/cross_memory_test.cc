// Cross-memory attach between real processes: a child's buffer read and written by pid and
// address, the probe word (found, or refused: another value, no such process, no pid), and
// the errors of a gone process and an unmapped range. The setting's parse.
#include "comm/tcp/cross_memory.h"

#include <doctest/doctest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <string>
#include <vector>

#include "common/error.h"
#include "tests/common/settings_test_util.h"

using namespace ddp;
using namespace ddp::comm::tcp;

namespace {

// A child holding a buffer of n words (word i = i), which it checks, after the parent wrote
// into it, for word i = 3 * i: its exit status says whether it found that.
struct Child {
  pid_t pid = -1;
  uint64_t addr = 0;
  int go = -1;  // the parent writes a byte when done

  explicit Child(size_t n) {
    int to_parent[2], to_child[2];
    REQUIRE(::pipe(to_parent) == 0);
    REQUIRE(::pipe(to_child) == 0);
    pid = ::fork();
    REQUIRE(pid >= 0);
    if (pid == 0) {
      std::vector<uint64_t> words(n);
      for (size_t i = 0; i < n; ++i) words[i] = i;
      const uint64_t a = reinterpret_cast<uint64_t>(words.data());
      if (::write(to_parent[1], &a, sizeof a) != sizeof a) ::_exit(2);
      char c;
      if (::read(to_child[0], &c, 1) != 1) ::_exit(3);
      for (size_t i = 0; i < n; ++i) {
        if (words[i] != 3 * i) ::_exit(1);
      }
      ::_exit(0);
    }
    ::close(to_parent[1]);
    ::close(to_child[0]);
    REQUIRE(::read(to_parent[0], &addr, sizeof addr) == sizeof addr);
    ::close(to_parent[0]);
    go = to_child[1];
  }
  int finish() {
    char c = 1;
    CHECK(::write(go, &c, 1) == 1);
    ::close(go);
    int status = 0;
    ::waitpid(pid, &status, 0);
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  }
};

}  // namespace

TEST_CASE("DDP_TCP_CMA: auto, on or off; anything else is refused by name") {
  settings::testing::check_choice_as<CrossSetting>(
      settings::kTcpCma,
      {{"auto", CrossSetting::kAuto}, {"on", CrossSetting::kOn}, {"off", CrossSetting::kOff}});
}

TEST_CASE("a child's buffer, read and written by pid and address (larger than one kernel copy)") {
  const size_t n = (3 << 20) / sizeof(uint64_t) + 5;  // 3 MiB and a bit: many pages, an odd tail
  Child child(n);
  std::vector<uint64_t> seen(n, 7);
  REQUIRE(cross_read(child.pid, child.addr, seen.data(), n * sizeof(uint64_t)) == 0);
  for (size_t i = 0; i < n; ++i) {
    if (seen[i] != i) FAIL("word ", i, " read as ", seen[i]);
  }
  for (size_t i = 0; i < n; ++i) seen[i] = 3 * i;
  REQUIRE(cross_write(child.pid, seen.data(), child.addr, n * sizeof(uint64_t)) == 0);
  CHECK(child.finish() == 0);
}

TEST_CASE("the probe: this process's word is found; another value, no pid or a gone process is not") {
  const CrossProbe me = cross_probe();
  CHECK(me.pid == ::getpid());
  CHECK(me.value != 0);
  CHECK(cross_reachable(me));
  CrossProbe wrong = me;
  wrong.value ^= 1;
  CHECK_FALSE(cross_reachable(wrong));
  CHECK_FALSE(cross_reachable(CrossProbe{}));
  Child child(4);
  const pid_t gone = child.pid;
  CHECK(child.finish() == 1);  // nothing written: it finds its own values
  CrossProbe dead = me;
  dead.pid = gone;
  CHECK_FALSE(cross_reachable(dead));
}

TEST_CASE("errors: a gone process is ESRCH, an unmapped range EFAULT") {
  Child child(4);
  const pid_t pid = child.pid;
  const uint64_t addr = child.addr;
  uint64_t word = 0;
  CHECK(cross_read(pid, 4096, &word, sizeof word) == EFAULT);  // page 1 is never mapped
  CHECK(child.finish() == 1);
  CHECK(cross_read(pid, addr, &word, sizeof word) == ESRCH);
  CHECK(cross_write(pid, &word, addr, sizeof word) == ESRCH);
}
