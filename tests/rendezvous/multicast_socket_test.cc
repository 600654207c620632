// Group sockets on loopback multicast (as root in a private network namespace; else pinned to lo).
#include "rendezvous/multicast_socket.h"

#include <doctest/doctest.h>
#include <poll.h>
#include <sched.h>
#include <unistd.h>

#include "common/error.h"

using namespace ddp;
using namespace ddp::rdzv::mcast;

namespace {

void private_network() {
  static bool done = [] {
    if (::geteuid() != 0 || ::unshare(CLONE_NEWNET) != 0) return false;
    return ::system("ip link set lo up && ip link set lo multicast on && ip route add 239.0.0.0/8 dev lo") ==
           0;
  }();
  (void)done;
}

SocketOptions on_lo(uint16_t port) {
  private_network();
  return SocketOptions{.group = "239.255.80.1", .port = port, .ttl = 1, .interface = "lo", .loopback = true};
}

bool readable(const MulticastSocket& s) {
  pollfd p{s.fd(), POLLIN, 0};
  return ::poll(&p, 1, 2000) == 1;
}

}  // namespace

TEST_CASE("two sockets on one group and port both hear a datagram; a long one is flagged truncated") {
  MulticastSocket a(on_lo(29801)), b(on_lo(29801));
  CHECK_FALSE(a.ipv6());
  const std::vector<uint8_t> hello = {'h', 'i'};
  REQUIRE(a.send(hello));
  std::vector<uint8_t> buf(16);
  for (const MulticastSocket* s : {&a, &b}) {
    REQUIRE(readable(*s));
    auto r = s->receive(buf);
    REQUIRE(r);
    CHECK(r->size == 2);
    CHECK_FALSE(r->truncated);
  }
  CHECK_FALSE(b.receive(buf));  // nothing more waiting
  std::vector<uint8_t> big(100, 'x');
  REQUIRE(a.send(big));
  REQUIRE(readable(b));
  auto r = b.receive(buf);
  REQUIRE(r);
  CHECK(r->truncated);
  CHECK(r->size == buf.size());
}

TEST_CASE("a group on another address is not heard on the same port") {
  MulticastSocket a(on_lo(29802));
  auto other = on_lo(29802);
  other.group = "239.255.80.2";
  MulticastSocket b(other);
  REQUIRE(b.send(std::vector<uint8_t>{'x'}));
  std::vector<uint8_t> buf(16);
  REQUIRE(readable(b));
  CHECK(b.receive(buf));
  pollfd p{a.fd(), POLLIN, 0};
  CHECK(::poll(&p, 1, 200) == 0);
}

TEST_CASE("bad options are clear errors") {
  auto o = on_lo(29803);
  o.group = "10.1.2.3";
  CHECK_THROWS_WITH_AS(MulticastSocket{o}, doctest::Contains("not an IP multicast group"), InvalidArgument);
  o = on_lo(29803);
  o.ttl = 256;
  CHECK_THROWS_WITH_AS(MulticastSocket{o}, doctest::Contains("ttl 256"), InvalidArgument);
  o = on_lo(0);
  CHECK_THROWS_WITH_AS(MulticastSocket{o}, doctest::Contains("needs a port"), InvalidArgument);
  o = on_lo(29803);
  o.interface = "nope0";
  CHECK_THROWS_WITH_AS(MulticastSocket{o}, doctest::Contains("no network interface named 'nope0'"),
                       InvalidArgument);
}
