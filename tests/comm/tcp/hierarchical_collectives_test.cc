// HostLayout: where each rank of a group sits, from the ranks' same-host keys. (The collectives
// themselves run across network namespaces: tests/netns/hierarchical_test.sh runs the
// conformance matrix over them.)
#include "comm/tcp/hierarchical_collectives.h"

#include <doctest/doctest.h>

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
