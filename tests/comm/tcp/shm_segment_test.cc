// ShmSegment's promises to the outside: its name follows common/shm_names.h (the launcher
// cleans up by that rule), and a /dev/shm too small for it is a clear error at creation, not
// a SIGBUS later.
#include "comm/tcp/shm_segment.h"

#include <doctest/doctest.h>
#include <sched.h>
#include <sys/mount.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstring>

#include "common/error.h"
#include "common/shm_names.h"
#include "private_namespaces.h"

using namespace ddp;
using namespace ddp::comm::tcp;

TEST_CASE("a segment's name names its creator by the shared rule") {
  ShmSegment s =
      ShmSegment::create(ShmGeometry{.world = 2, .depth = 2, .slot_bytes = 4096, .oneshot_bytes = 1024});
  REQUIRE(s.name().size() > 1);
  CHECK(shm_names::tcp_segment_creator(s.name().substr(1)) == ::getpid());
}

// A private mount namespace with a 1 MiB tmpfs on /dev/shm (Docker's 64 MiB, scaled down). Needs
// root (CAP_SYS_ADMIN): its own ctest, Skipped elsewhere.
TEST_CASE("a /dev/shm too small for the segment: an error naming the size and /dev/shm at creation" *
          doctest::skip(!ddp::test::can_mount_private_shm())) {
  int p[2];
  REQUIRE(::pipe(p) == 0);
  pid_t child = ::fork();
  REQUIRE(child >= 0);
  if (child == 0) {
    ::close(p[0]);
    std::string out;
    if (::unshare(CLONE_NEWNS) != 0 || ::mount(nullptr, "/", nullptr, MS_REC | MS_PRIVATE, nullptr) != 0 ||
        ::mount("tmpfs", "/dev/shm", "tmpfs", 0, "size=1m") != 0) {
      out = std::string("skip: ") + std::strerror(errno);
    } else {
      try {
        ShmSegment::create(ShmGeometry{.world = 4, .depth = 4, .slot_bytes = 1 << 20, .oneshot_bytes = 1024});
        out = "created";
      } catch (const Error& e) {
        out = "error: " + e.message();
      }
    }
    [[maybe_unused]] ssize_t n = ::write(p[1], out.data(), out.size());
    ::_exit(0);
  }
  ::close(p[1]);
  std::string got;
  char buf[1024];
  ssize_t n;
  while ((n = ::read(p[0], buf, sizeof buf)) > 0) got.append(buf, static_cast<size_t>(n));
  ::close(p[0]);
  int status = 0;
  ::waitpid(child, &status, 0);
  CHECK(WIFEXITED(status));  // before posix_fallocate: created, then SIGBUS on first touch of a slot
  REQUIRE_MESSAGE(!got.starts_with("skip: "), "no private mount namespace where the probe found one: ", got);
  CHECK(got.starts_with("error: "));
  CHECK(got.find(
            std::to_string(ShmGeometry{.world = 4, .depth = 4, .slot_bytes = 1 << 20, .oneshot_bytes = 1024}
                               .total_bytes()) +
            " bytes") != std::string::npos);
  CHECK(got.find("/dev/shm") != std::string::npos);
  CHECK(got.find("DDP_TCP_TRANSPORT=socket") != std::string::npos);
}

TEST_CASE("slot_bytes_for_l2: L2 / 4 as a power of two in [64 KiB, 256 KiB]; 256 KiB when unknown") {
  CHECK(slot_bytes_for_l2(0) == 256u << 10);
  CHECK(slot_bytes_for_l2(256u << 10) == 64u << 10);   // never below 64 KiB
  CHECK(slot_bytes_for_l2(512u << 10) == 128u << 10);  // AMD Zen 3
  CHECK(slot_bytes_for_l2(768u << 10) == 128u << 10);
  CHECK(slot_bytes_for_l2(1u << 20) == 256u << 10);
  CHECK(slot_bytes_for_l2(1280u << 10) == 256u << 10);  // 1.25 MiB (Intel Ice Lake)
  CHECK(slot_bytes_for_l2(2u << 20) == 256u << 10);     // capped
}
