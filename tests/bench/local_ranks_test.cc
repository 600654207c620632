// local_ranks: the CPUs -n's ranks bind to come from this process's mask, one each, and there
// are none to bind to when the mask holds fewer than the ranks.
#include "bench/local_ranks.h"

#include <doctest/doctest.h>
#include <sched.h>

#include "common/machine.h"

using namespace ddp::bench;

TEST_CASE("rank_cpus: the first `world` CPUs this process may use; none when there are fewer") {
  cpu_set_t set;
  CPU_ZERO(&set);
  REQUIRE(sched_getaffinity(0, sizeof(set), &set) == 0);
  const int count = CPU_COUNT(&set);
  for (int world = 1; world <= count; ++world) {
    CAPTURE(world);
    const auto cpus = rank_cpus(world);  // first_usable_cpus' own order is machine_test's
    CHECK(cpus.size() == static_cast<size_t>(world));
    CHECK(cpus == ddp::first_usable_cpus(world));
  }
  CHECK(rank_cpus(count + 1).empty());
}

TEST_CASE("rank_cpus follows a narrowed mask: one CPU holds one rank, not two") {
  cpu_set_t saved;
  CPU_ZERO(&saved);
  REQUIRE(sched_getaffinity(0, sizeof(saved), &saved) == 0);
  int first = 0;
  while (!CPU_ISSET(first, &saved)) ++first;
  cpu_set_t one;
  CPU_ZERO(&one);
  CPU_SET(first, &one);
  REQUIRE(sched_setaffinity(0, sizeof(one), &one) == 0);
  const auto single = rank_cpus(1);
  const auto pair = rank_cpus(2);
  REQUIRE(sched_setaffinity(0, sizeof(saved), &saved) == 0);  // restored before any CHECK
  REQUIRE(single.size() == 1);
  CHECK(single[0] == first);
  CHECK(pair.empty());
}
