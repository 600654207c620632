// The socket all_reduce's algorithm names and its auto rule (the algorithms themselves run in
// the conformance matrix: conformance_tcp_socket_{direct,hd,ring}).
#include <doctest/doctest.h>

#include "comm/tcp/socket_collectives.h"
#include "common/error.h"

namespace ddp::comm::tcp {
namespace {

constexpr size_t kOneshot = 64 << 10, kChunk = 256 << 10;

SocketAlgo pick(size_t bytes, int world) {
  return choose_socket_algo(bytes, bytes / 4, world, kOneshot, kChunk);
}

TEST_CASE("DDP_TCP_SOCKET_ALGO names round-trip; anything else names the variable") {
  for (auto a : {SocketAlgo::kAuto, SocketAlgo::kDirect, SocketAlgo::kHalvingDoubling, SocketAlgo::kRing}) {
    CHECK(parse_socket_algo(to_string(a)) == a);
  }
  CHECK_THROWS_WITH_AS(parse_socket_algo("tree"), doctest::Contains("DDP_TCP_SOCKET_ALGO='tree'"),
                       InvalidArgument);
  CHECK_THROWS_AS(parse_socket_algo(""), InvalidArgument);
}

TEST_CASE("auto: direct for small buffers and for 2 or 3 ranks, whatever the size") {
  CHECK(pick(kOneshot, 16) == SocketAlgo::kDirect);
  CHECK(pick(size_t{1} << 30, 2) == SocketAlgo::kDirect);
  CHECK(pick(size_t{1} << 30, 3) == SocketAlgo::kDirect);
  CHECK(choose_socket_algo(size_t{1} << 20, 3, 4, kOneshot, kChunk) ==
        SocketAlgo::kDirect);  // fewer elements than ranks
}

TEST_CASE("auto: hd while each rank's part is under a chunk, ring from there") {
  CHECK(pick(4 * kChunk - 4, 4) == SocketAlgo::kHalvingDoubling);
  CHECK(pick(4 * kChunk, 4) == SocketAlgo::kRing);
  CHECK(pick(size_t{1} << 20, 64) == SocketAlgo::kHalvingDoubling);
  CHECK(pick(size_t{256} << 20, 64) == SocketAlgo::kRing);
  // The rule follows the chunk size (the same knob on every rank), not a constant.
  CHECK(choose_socket_algo(size_t{1} << 20, size_t{1} << 18, 8, kOneshot, 64 << 10) == SocketAlgo::kRing);
}

}  // namespace
}  // namespace ddp::comm::tcp
