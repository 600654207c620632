#include "common/host_addresses.h"

#include <doctest/doctest.h>

#include <algorithm>

using namespace ddp::net;

TEST_CASE("local_addresses: never empty, the route's source first, no duplicates") {
  auto any = local_addresses("");
  REQUIRE_FALSE(any.empty());
  auto via_lo = local_addresses("127.0.0.1");
  REQUIRE_FALSE(via_lo.empty());
  CHECK(via_lo.front() == "127.0.0.1");
  auto sorted = via_lo;
  std::sort(sorted.begin(), sorted.end());
  CHECK(std::adjacent_find(sorted.begin(), sorted.end()) == sorted.end());
  for (const auto& ip : local_addresses("does-not-resolve.invalid")) CHECK_FALSE(ip.starts_with("fe80"));
}

TEST_CASE("interface_addresses: loopback last; resolve_addresses of literals and nonsense") {
  auto all = interface_addresses();
  bool seen_loopback = false;
  for (const auto& ip : all) {
    const bool loop = ip == "127.0.0.1" || ip == "::1";
    CHECK_FALSE((seen_loopback && !loop));
    seen_loopback = seen_loopback || loop;
  }
  CHECK(resolve_addresses("127.0.0.1").front() == "127.0.0.1");
  CHECK(resolve_addresses("::1").front() == "::1");
  CHECK(resolve_addresses("does-not-resolve.invalid").empty());
}
