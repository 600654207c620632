#include "ddp/coalesce.h"

#include <doctest/doctest.h>

#include "tests/ddp/rank_threads.h"

using namespace ddp;
using ddp::testing::run_ranks;

TEST_CASE("broadcast_coalesced: mixed dtypes and a small cap, every buffer arrives") {
  std::vector<std::vector<double>> seen(3);
  run_ranks(3, [&](int rank, comm::ProcessGroupPtr g) {
    std::vector<float> a(5, float(rank)), b(3, float(rank) + 0.5f), big(40, float(rank));
    std::vector<double> c(2, rank * 10.0);
    std::vector<comm::Buffer> bufs{comm::view(a.data(), 5), comm::view(b.data(), 3), comm::view(c.data(), 2),
                                   comm::view(big.data(), 40)};
    broadcast_coalesced(*g, bufs, /*root=*/1, /*cap_bytes=*/64);
    seen[rank] = {a[4], b[0], c[1], big[39]};
  });
  for (const auto& s : seen) CHECK(s == std::vector<double>{1, 1.5, 10, 1});
}
