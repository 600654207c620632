// shm_names: the naming rule of the tcp backend's segments, and the launcher's clean-up by it.
#include "common/shm_names.h"

#include <doctest/doctest.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <filesystem>

using namespace ddp;
using namespace ddp::shm_names;

namespace {

bool exists(const std::string& name) { return std::filesystem::exists("/dev/shm" + name); }

void create(const std::string& name) {
  int fd = ::shm_open(name.c_str(), O_CREAT | O_RDWR | O_CLOEXEC, 0600);
  REQUIRE(fd >= 0);
  ::close(fd);
}

}  // namespace

TEST_CASE("the name encodes the creator; only names that follow the rule are recognised") {
  CHECK(tcp_segment(1234, 0xdeadbeef) == "/ddp-tcp-1234-00000000deadbeef");
  CHECK(tcp_segment_creator("ddp-tcp-1234-00000000deadbeef") == 1234);
  CHECK(tcp_segment_creator(tcp_segment(77, ~0ull).substr(1)) == 77);
  for (const char* bad :
       {"ddp-tcp-1234-deadbeef", "ddp-tcp--00000000deadbeef", "ddp-tcp-0012-00000000deadbeef",
        "ddp-tcp-12a4-00000000deadbeef", "ddp-tcp-1234-00000000DEADBEEF", "ddp-tcp-1234_00000000deadbeef",
        "other-1234-00000000deadbeef", "ddp-tcp-12345678901-00000000deadbeef", ""}) {
    CAPTURE(bad);
    CHECK(tcp_segment_creator(bad) == -1);
  }
}

TEST_CASE("remove_tcp_segments removes the given creators' segments and nothing else") {
  // Pids far above any live process of this test: names only, nobody creates these.
  const pid_t dead = 999'999'001, other = 999'999'002;
  const std::string mine1 = tcp_segment(dead, 1), mine2 = tcp_segment(dead, 2),
                    theirs = tcp_segment(other, 3);
  const std::string lookalike = "/ddp-tcp-" + std::to_string(dead) + "-notasegment";
  for (const auto& n : {mine1, mine2, theirs, lookalike}) create(n);
  CHECK(remove_tcp_segments({dead}) == 2);
  CHECK_FALSE(exists(mine1));
  CHECK_FALSE(exists(mine2));
  CHECK(exists(theirs));
  CHECK(exists(lookalike));
  CHECK(remove_tcp_segments({}) == 0);
  ::shm_unlink(theirs.c_str());
  ::shm_unlink(lookalike.c_str());
}
