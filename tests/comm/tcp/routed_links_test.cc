// RoutedLinks: the all_reduces written over a ByteTransport, run across two "hosts" of two ranks
// each (ranks as threads): the hops within a host through that host's ShmLinks, the others
// through a second ShmLinks over all four ranks standing in for the sockets (over real sockets
// and hosts: netns_hosts_conformance_2x2_large_flat). Errors name the group's ranks.
#include "comm/tcp/routed_links.h"

#include <doctest/doctest.h>

#include <memory>
#include <string>
#include <vector>

#include "tests/comm/tcp/links_test_util.h"

namespace ddp::comm::tcp {
namespace {

using testing::expect;

// Ranks 0, 1 on host 0; 2, 3 on host 1 (interleaved: `interleaved` puts 0, 2 on host 0).
void run_hosts(bool interleaved, Millis timeout, const std::function<void(RoutedLinks&, OpContext&)>& body) {
  auto far_store = std::make_shared<rdzv::HashStore>();
  std::vector<std::shared_ptr<rdzv::Store>> host_store = {std::make_shared<rdzv::HashStore>(),
                                                          std::make_shared<rdzv::HashStore>()};
  auto host_of = [&](int r) { return interleaved ? r % 2 : r / 2; };
  testing::run_threads(4, [&](int r) {
    GroupHealth health;
    health.init(4);
    ShmLinks far(far_store, testing::small_fifos(r, 4), &health);
    std::vector<int> local_of(4, -1);
    for (int p = 0, k = 0; p < 4; ++p) {
      if (host_of(p) == host_of(r)) local_of[static_cast<size_t>(p)] = k++;
    }
    const int local = local_of[static_cast<size_t>(r)];
    auto near = std::make_unique<ShmLinks>(host_store[static_cast<size_t>(host_of(r))],
                                           testing::small_fifos(local, 2), &health);
    RoutedLinks links(far, std::move(near), local_of);
    OpContext ctx = testing::all_reduce_context(timeout);
    body(links, ctx);
  });
}

TEST_CASE("RoutedLinks: direct, ring and hd all_reduce across two hosts of two ranks, exact") {
  for (bool interleaved : {false, true}) {
    CAPTURE(interleaved);
    for (testing::ByteAllReduce algo : testing::kByteAllReduces) {
      run_hosts(interleaved, Millis(30'000), [&](RoutedLinks& links, OpContext& ctx) {
        expect(links.rank() >= 0 && links.world() == 4, "the group's ranks");
        testing::check_sums(algo, links, ctx);
      });
    }
  }
}

TEST_CASE("RoutedLinks: a late peer, on this host or another, is named by its rank in the group") {
  run_hosts(false, Millis(300), [](RoutedLinks& links, OpContext& ctx) {
    if (links.rank() != 0) return;
    char c[2] = {};
    ByteTransport::Batch b;
    links.recv(b, 1, 0, &c[0], 1, ctx);  // this host's
    links.recv(b, 3, 0, &c[1], 1, ctx);  // the other's
    const std::string error = testing::error_of<TimeoutError>([&] { links.wait(b, ctx); });
    expect(error.find("waiting for ranks [1, 3]") != std::string::npos, error);
  });
}

}  // namespace
}  // namespace ddp::comm::tcp
