// HostLayout: where each rank of a group sits, from the ranks' same-host keys, and
// hierarchy_overlap: whether a pipelined all_reduce's steps within the host run on a second
// thread (DDP_TCP_HIERARCHY_OVERLAP). (The collectives
// themselves run across network namespaces: tests/netns/hierarchical_test.sh runs the
// conformance matrix over them.)
#include "comm/tcp/hierarchical_collectives.h"

#include <doctest/doctest.h>

#include "common/error.h"

using namespace ddp::comm::tcp;

TEST_CASE("host-major ranks: hosts by lowest rank, local and cross indices in rank order") {
  const HostLayout l = HostLayout::of({"a", "a", "b", "b"});
  CHECK(l.hosts == 2);
  CHECK(l.per_host == 2);
  CHECK(l.hierarchical());
  CHECK(l.host_of == std::vector<int>{0, 0, 1, 1});
  CHECK(l.local_of == std::vector<int>{0, 1, 0, 1});
  CHECK(l.cross_of == std::vector<int>{0, 0, 1, 1});
}

TEST_CASE("interleaved ranks: a rank's index in each child group is its position there") {
  // Host a holds ranks 0 and 3, host b ranks 1 and 2: the local-index-1 group is {2, 3}, where
  // rank 2 (host b) comes first.
  const HostLayout l = HostLayout::of({"a", "b", "b", "a"});
  CHECK(l.host_of == std::vector<int>{0, 1, 1, 0});
  CHECK(l.local_of == std::vector<int>{0, 0, 1, 1});
  CHECK(l.cross_of == std::vector<int>{0, 1, 0, 1});
  CHECK(l.hierarchical());
}

TEST_CASE("layouts that are not hierarchical") {
  CHECK_FALSE(HostLayout::of({"a", "a", "a"}).hierarchical());  // one host: shared memory only
  CHECK(HostLayout::of({"a", "a", "a"}).hosts == 1);
  CHECK_FALSE(HostLayout::of({"a", "b", "c"}).hierarchical());  // one rank per host: sockets only
  const HostLayout uneven = HostLayout::of({"a", "a", "b"});
  CHECK(uneven.per_host == 0);
  CHECK_FALSE(uneven.hierarchical());
  CHECK(HostLayout::of({}).hosts == 0);
}

TEST_CASE("DDP_TCP_HIERARCHY_OVERLAP: auto overlaps where each rank on the host has a second CPU") {
  CHECK(hierarchy_overlap("auto", 16, 2));
  CHECK(hierarchy_overlap("auto", 4, 2));
  CHECK_FALSE(hierarchy_overlap("auto", 3, 2));
  CHECK_FALSE(hierarchy_overlap("auto", 2, 2));  // this kind of 2-CPU VM, 2 ranks a host
  CHECK(hierarchy_overlap("auto", 2, 0));        // an unknown count is one rank
  CHECK_FALSE(hierarchy_overlap("auto", 0, 1));  // CPUs unknown: no second thread
  for (const char* on : {"1", "true", "On", "yes"}) CHECK(hierarchy_overlap(on, 1, 8));
  for (const char* off : {"0", "false", "OFF", "no"}) CHECK_FALSE(hierarchy_overlap(off, 64, 1));
  for (const char* bad : {"", "2", "maybe", " 1"}) {
    CAPTURE(bad);
    CHECK_THROWS_WITH_AS(hierarchy_overlap(bad, 16, 2), doctest::Contains("DDP_TCP_HIERARCHY_OVERLAP"),
                         ddp::InvalidArgument);
  }
}
