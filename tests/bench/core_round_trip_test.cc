// core_round_trip: the CPUs come from this process's mask, and a measurement between two of them
// is a positive, finite time (its size is the machine's business, not the test's).
#include "bench/core_round_trip.h"

#include <doctest/doctest.h>
#include <sched.h>

#include <cmath>

using namespace ddp::bench;

TEST_CASE("two_cpus: the first two this process may use, or none with fewer") {
  cpu_set_t set;
  CPU_ZERO(&set);
  REQUIRE(sched_getaffinity(0, sizeof(set), &set) == 0);
  const auto cpus = two_cpus();
  if (CPU_COUNT(&set) < 2) {
    CHECK_FALSE(cpus.has_value());
    return;
  }
  REQUIRE(cpus.has_value());
  CHECK(cpus->first < cpus->second);
  CHECK(CPU_ISSET(cpus->first, &set));
  CHECK(CPU_ISSET(cpus->second, &set));
}

// Needs two CPUs: its own ctest, Skipped with one.
TEST_CASE("a round trip between two CPUs is measured, and the caller's CPU mask is left alone" *
          doctest::skip(!two_cpus().has_value())) {
  const auto cpus = two_cpus();
  REQUIRE(cpus.has_value());
  cpu_set_t before, after;
  CPU_ZERO(&before);
  CPU_ZERO(&after);
  REQUIRE(sched_getaffinity(0, sizeof(before), &before) == 0);
  const auto ns = core_round_trip_ns(*cpus, 2000, 3);
  REQUIRE(ns.has_value());
  CHECK(*ns > 0);
  CHECK(std::isfinite(*ns));
  REQUIRE(sched_getaffinity(0, sizeof(after), &after) == 0);
  CHECK(CPU_EQUAL(&before, &after));
}

TEST_CASE("a CPU this process may not use cannot be pinned: no figure") {
  CHECK_FALSE(core_round_trip_ns({0, CPU_SETSIZE + 5}, 10, 1).has_value());
}
