// cma_floor: two real processes reduce each other's private buffers through the kernel; every
// element of both is checked by the processes themselves (a wrong sum throws), chunks that do not
// divide a half are handled, and nothing is left behind. Never a timing check.
#include "bench/cma_floor.h"

#include <doctest/doctest.h>
#include <sched.h>
#include <sys/wait.h>

#include <cerrno>
#include <cmath>
#include <stdexcept>

#include "bench/core_round_trip.h"
#include "common/machine.h"

using namespace ddp::bench;

namespace {

std::pair<int, int> cpus() {
  const auto two = two_cpus();
  return two ? *two : std::pair<int, int>{0, 0};
}

// Whether the kernel lets two processes of this user reduce each other's buffers (seccomp or
// Yama 3 may refuse): the cases that need it have their own ctest, Skipped where it is refused.
bool cma_allowed() {
  static const bool ok = !cma_floor({.bytes = 64, .repeats = 1, .cpus = cpus()}).samples_us.empty();
  return ok;
}

// No child of this process is left, running or unreaped.
bool no_children_left() { return ::waitpid(-1, nullptr, WNOHANG) == -1 && errno == ECHILD; }

}  // namespace

TEST_CASE("the chunk follows the L2: a quarter of it, 64 KiB to 1 MiB, 256 KiB when unknown") {
  CHECK(cma_chunk_bytes(0) == 256u << 10);
  CHECK(cma_chunk_bytes(2u << 20) == 512u << 10);
  CHECK(cma_chunk_bytes(1u << 20) == 256u << 10);
  CHECK(cma_chunk_bytes(128u << 10) == 64u << 10);
  CHECK(cma_chunk_bytes(32u << 20) == 1u << 20);
}

TEST_CASE("two processes reduce each other's private buffers, one sample per repeat" *
          doctest::skip(!cma_allowed())) {
  const CmaFloor f = cma_floor({.bytes = 1 << 20, .repeats = 3, .cpus = cpus()});
  CHECK(no_children_left());
  INFO("why: ", f.why);
  REQUIRE(f.samples_us.size() == 3);
  for (double us : f.samples_us) {
    CHECK(us > 0);
    CHECK(std::isfinite(us));
  }
  CHECK(f.chunk_bytes == cma_chunk_bytes(ddp::machine_profile().l2_bytes));
}

TEST_CASE("chunks that do not divide a half, and halves of one and two floats" *
          doctest::skip(!cma_allowed())) {
  // 3 floats: process 0 sums one, process 1 two, in 4-byte chunks; then 4099 floats in
  // chunks of 12 bytes. 130 repeats run the sums past float's range to inf, still checked.
  for (const auto& o :
       {CmaFloorOptions{.bytes = 12, .repeats = 130, .cpus = cpus(), .chunk_bytes = 4},
        CmaFloorOptions{.bytes = size_t{4099} * 4, .repeats = 5, .cpus = cpus(), .chunk_bytes = 12}}) {
    const CmaFloor f = cma_floor(o);
    CHECK(no_children_left());
    INFO("why: ", f.why);
    CHECK(f.samples_us.size() == static_cast<size_t>(o.repeats));
    CHECK(f.chunk_bytes == o.chunk_bytes);
  }
}

TEST_CASE("a chunk past the larger half is cut to it, and the chunk used is reported") {
  const CmaFloor f =
      cma_floor({.bytes = 64 << 10, .repeats = 2, .cpus = cpus(), .chunk_bytes = size_t{1} << 40});
  CHECK(no_children_left());
  CHECK(f.chunk_bytes == 32u << 10);
  const CmaFloor odd = cma_floor({.bytes = 12, .repeats = 2, .cpus = cpus(), .chunk_bytes = 1 << 20});
  CHECK(odd.chunk_bytes == 8);  // 3 floats: halves of 1 and 2
  const CmaFloor tiny = cma_floor({.bytes = 64, .repeats = 2, .cpus = cpus(), .chunk_bytes = 3});
  CHECK(tiny.chunk_bytes == 4);  // under a float: one float
}

TEST_CASE("fewer than two floats or no repeat is refused before anything starts") {
  CHECK_THROWS_AS(cma_floor({.bytes = 4, .repeats = 3}), std::invalid_argument);
  CHECK_THROWS_AS(cma_floor({.bytes = 1024, .repeats = 0}), std::invalid_argument);
  CHECK(no_children_left());
}

TEST_CASE("the caller's CPU mask is left alone (the processes pin themselves)") {
  cpu_set_t before, after;
  CPU_ZERO(&before);
  CPU_ZERO(&after);
  REQUIRE(sched_getaffinity(0, sizeof(before), &before) == 0);
  (void)cma_floor({.bytes = 64 << 10, .repeats = 2, .cpus = cpus()});
  REQUIRE(sched_getaffinity(0, sizeof(after), &after) == 0);
  CHECK(CPU_EQUAL(&before, &after));
}
