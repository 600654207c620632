// ShmFile: a created object is mapped, named by the rule the launcher cleans up by, shared
// with whoever opens it, and gone from /dev/shm once unlinked or destroyed.
#include "comm/tcp/shm_file.h"

#include <doctest/doctest.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>

#include "common/error.h"
#include "common/shm_names.h"

using namespace ddp;
using namespace ddp::comm::tcp;

namespace {
bool in_dev_shm(const std::string& name) { return std::filesystem::exists("/dev/shm" + name); }
}  // namespace

TEST_CASE("ShmFile: create, open by name, share bytes, unlink") {
  ShmFile a = ShmFile::create(8192, "for a test");
  REQUIRE(a.valid());
  CHECK(a.bytes() == 8192);
  CHECK(shm_names::tcp_segment_creator(a.name().substr(1)) == ::getpid());
  CHECK(in_dev_shm(a.name()));
  ShmFile b = ShmFile::open(a.name());
  CHECK(b.bytes() == 8192);
  std::memcpy(a.base() + 100, "hello", 5);
  CHECK(std::memcmp(b.base() + 100, "hello", 5) == 0);
  a.unlink();
  CHECK_FALSE(in_dev_shm(a.name()));
  std::memcpy(b.base(), "still", 5);  // both mappings live on after the name is gone
  CHECK(std::memcmp(a.base(), "still", 5) == 0);
}

TEST_CASE("ShmFile: the creator's destructor removes the name; a moved-from file owns nothing") {
  std::string name;
  {
    ShmFile a = ShmFile::create(4096, "for a test");
    name = a.name();
    ShmFile moved = std::move(a);
    CHECK_FALSE(a.valid());  // NOLINT(bugprone-use-after-move): the moved-from state is the point
    CHECK(in_dev_shm(name));
  }
  CHECK_FALSE(in_dev_shm(name));
}

TEST_CASE("ShmFile: opening a name that does not exist is a SystemError naming it") {
  CHECK_THROWS_WITH_AS(ShmFile::open("/ddp-tcp-1-00000000deadbeef"),
                       doctest::Contains("ddp-tcp-1-00000000deadbeef"), SystemError);
}
