#include "common/host_addresses.h"

#include <doctest/doctest.h>

#include <arpa/inet.h>
#include <netinet/in.h>

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

TEST_CASE("ip_text and endpoint_text: the one formatting of IPv4 and IPv6 addresses") {
  sockaddr_in v4{};
  v4.sin_family = AF_INET;
  v4.sin_port = htons(29500);
  REQUIRE(inet_pton(AF_INET, "10.1.2.3", &v4.sin_addr) == 1);
  CHECK(ip_text(reinterpret_cast<const sockaddr*>(&v4)) == "10.1.2.3");
  CHECK(ip_text(AF_INET, &v4.sin_addr) == "10.1.2.3");
  CHECK(endpoint_text(reinterpret_cast<const sockaddr*>(&v4)) == "10.1.2.3:29500");
  sockaddr_in6 v6{};
  v6.sin6_family = AF_INET6;
  v6.sin6_port = htons(7);
  REQUIRE(inet_pton(AF_INET6, "fd00::1", &v6.sin6_addr) == 1);
  CHECK(ip_text(reinterpret_cast<const sockaddr*>(&v6)) == "fd00::1");
  CHECK(ip_text(AF_INET6, &v6.sin6_addr) == "fd00::1");
  CHECK(endpoint_text(reinterpret_cast<const sockaddr*>(&v6)) == "[fd00::1]:7");
  sockaddr other{};
  other.sa_family = AF_UNIX;
  CHECK(ip_text(&other).empty());
  CHECK(ip_text(AF_UNIX, &v4.sin_addr).empty());
  CHECK(endpoint_text(&other) == "?");
}

TEST_CASE("interface_addresses: no IPv6 link-local address (fe80::/10)") {
  for (const auto& ip : interface_addresses()) {
    CHECK_FALSE(ip.starts_with("fe8"));
    CHECK_FALSE(ip.starts_with("fe9"));
    CHECK_FALSE(ip.starts_with("fea"));
    CHECK_FALSE(ip.starts_with("feb"));
  }
}
