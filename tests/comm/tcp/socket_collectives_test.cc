// stripe_plan: which of several connections to one peer a collective's message takes, or how it
// is split over them (the transfers themselves run in tcp_process_group_test and
// conformance_tcp_socket_streams),
// and socket_streams: how many connections (DDP_TCP_SOCKET_STREAMS).
#include <doctest/doctest.h>

#include "comm/tcp/socket_collectives.h"
#include "common/error.h"
#include "tests/common/settings_test_util.h"

namespace ddp::comm::tcp {
namespace {

constexpr size_t kChunk = 256 << 10;

// The parts cover [0, bytes) exactly once, in 64-byte multiples, none empty.
void check_covers(size_t bytes, const StripePlan& p) {
  CAPTURE(bytes);
  REQUIRE(p.parts >= 1);
  if (p.parts == 1) return;
  CHECK(p.part_bytes % 64 == 0);
  CHECK(p.parts * p.part_bytes >= bytes);
  CHECK((p.parts - 1) * p.part_bytes < bytes);
}

TEST_CASE(
    "DDP_TCP_SOCKET_STREAMS: auto takes one per CPU of the rank's share beyond its op's thread, 1 to 4") {
  CHECK(socket_streams(std::nullopt, 16, 1) == 4);  // capped
  CHECK(socket_streams(std::nullopt, 4, 1) == 3);
  CHECK(socket_streams(std::nullopt, 16, 2) == 4);
  CHECK(socket_streams(std::nullopt, 8, 2) == 3);
  CHECK(socket_streams(std::nullopt, 6, 2) == 2);
  CHECK(socket_streams(std::nullopt, 5, 2) == 1);
  CHECK(socket_streams(std::nullopt, 16, 8) == 1);
  CHECK(socket_streams(std::nullopt, 16, 32) == 1);  // more ranks than CPUs
  CHECK(socket_streams(std::nullopt, 2, 1) == 1);    // this kind of 2-CPU VM
  CHECK(socket_streams(std::nullopt, 3, 0) == 2);    // an unknown count is one rank
  CHECK(socket_streams(std::nullopt, 0, 1) == 1);    // CPUs unknown: one
  CHECK(socket_streams(1, 64, 1) == 1);
  CHECK(socket_streams(8, 2, 4) == 8);  // a count is taken as given
}

TEST_CASE(
    "DDP_TCP_SOCKET_STREAMS reads as auto (nullopt) or a count 1 to 8; anything else is refused by name") {
  using ddp::settings::testing::SetEnv;
  const ddp::settings::Setting& s = ddp::settings::kTcpSocketStreams;
  for (const char* autos : {"auto", "AUTO", ""}) {
    SetEnv env(s, autos);
    CHECK_FALSE(ddp::settings::auto_int(s).has_value());
  }
  for (const char* n : {"1", "8"}) {
    SetEnv env(s, n);
    CHECK(ddp::settings::auto_int(s) == std::stoll(n));
  }
  for (const char* bad : {"0", "9", "two", "2x", "-1", " 2", "99999999999999999999"}) {
    CAPTURE(bad);
    SetEnv env(s, bad);
    CHECK_THROWS_WITH_AS(
        ddp::settings::auto_int(s),
        doctest::Contains(
            (std::string("DDP_TCP_SOCKET_STREAMS='") + bad + "': auto, or an integer from 1 to 8").c_str()),
        InvalidArgument);
  }
}

TEST_CASE("one connection, or a message under chunk / streams: the first connection, not counted") {
  for (size_t index : {size_t{0}, size_t{1}, size_t{7}}) {
    CAPTURE(index);
    for (const StripePlan& p :
         {stripe_plan(size_t{1} << 30, 1, kChunk, index), stripe_plan(0, 4, kChunk, index),
          stripe_plan(4, 4, kChunk, index), stripe_plan(kChunk / 2 - 1, 2, kChunk, index)}) {
      CHECK(p.parts == 1);
      CHECK(p.lane == 0);
      CHECK_FALSE(p.counted);
    }
  }
}

TEST_CASE("messages of up to a chunk go whole, taking turns on the connections") {
  for (int streams : {2, 3, 4, 8}) {
    CAPTURE(streams);
    for (size_t bytes : {kChunk / static_cast<size_t>(streams), kChunk / 2 + 8, kChunk}) {
      CAPTURE(bytes);
      for (size_t index = 0; index < 20; ++index) {
        const StripePlan p = stripe_plan(bytes, streams, kChunk, index);
        CHECK(p.parts == 1);
        CHECK(p.counted);
        CHECK(p.lane == static_cast<int>(index % static_cast<size_t>(streams)));
      }
    }
  }
}

TEST_CASE("a message larger than a chunk is split over every stream, counted") {
  for (int streams : {2, 3, 4, 8}) {
    CAPTURE(streams);
    for (size_t bytes : {kChunk + 64, size_t{64} << 20}) {
      const StripePlan big = stripe_plan(bytes, streams, kChunk, 5);
      CHECK(big.parts == static_cast<size_t>(streams));
      CHECK(big.counted);
      check_covers(bytes, big);
    }
  }
}

TEST_CASE("uneven sizes: the last part is shorter, no part is empty") {
  for (size_t bytes : {size_t{4097}, size_t{100003}, size_t{262145}, size_t{(1 << 20) + 4}}) {
    for (int streams : {2, 3, 5}) {
      CAPTURE(streams);
      check_covers(bytes, stripe_plan(bytes, streams, 4096, 0));
    }
  }
  // Parts never fall under chunk_bytes / streams: 4160 B over 3 streams of a 4 KiB chunk is 3
  // parts of 1408 B (the last 1344), not 3 of 1387.
  const StripePlan p = stripe_plan(4160, 3, 4096, 0);
  CHECK(p.parts == 3);
  CHECK(p.part_bytes == 1408);
}

}  // namespace
}  // namespace ddp::comm::tcp
