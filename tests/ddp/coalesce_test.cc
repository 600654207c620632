#include "ddp/coalesce.h"

#include <doctest/doctest.h>

#include "tests/ddp/rank_threads.h"

using namespace ddp;
using ddp::testing::run_ranks;

TEST_CASE("broadcast_coalesced: mixed dtypes and a small cap, every buffer arrives") {
  // Every element differs by rank, buffer and position, so a buffer sent short, unpacked at the
  // wrong offset or taken from the wrong rank shows: a and b share a staging piece, c (another
  // dtype) has its own, big (160 B, past the cap) goes alone in place.
  auto value = [](int rank, int buffer, size_t i) {
    return rank * 1000.0 + buffer * 100.0 + static_cast<double>(i);
  };
  auto fill = [&](auto& v, int rank, int buffer) {
    for (size_t i = 0; i < v.size(); ++i)
      v[i] = static_cast<std::decay_t<decltype(v[0])>>(value(rank, buffer, i));
  };
  std::vector<std::vector<std::vector<double>>> seen(3);
  run_ranks(3, [&](int rank, comm::ProcessGroupPtr g) {
    std::vector<float> a(5), b(3), big(40);
    std::vector<double> c(2);
    fill(a, rank, 0);
    fill(b, rank, 1);
    fill(c, rank, 2);
    fill(big, rank, 3);
    std::vector<comm::Buffer> bufs{comm::view(a.data(), 5), comm::view(b.data(), 3), comm::view(c.data(), 2),
                                   comm::view(big.data(), 40)};
    broadcast_coalesced(*g, bufs, /*root=*/1, /*cap_bytes=*/64);
    seen[rank] = {{a.begin(), a.end()}, {b.begin(), b.end()}, {c.begin(), c.end()}, {big.begin(), big.end()}};
  });
  for (int rank = 0; rank < 3; ++rank) {
    for (int buffer = 0; buffer < 4; ++buffer) {
      const auto& got = seen[rank][buffer];
      CAPTURE(rank);
      CAPTURE(buffer);
      REQUIRE(got.size() == std::vector<size_t>{5, 3, 2, 40}[buffer]);
      for (size_t i = 0; i < got.size(); ++i) CHECK(got[i] == value(1, buffer, i));
    }
  }
}
