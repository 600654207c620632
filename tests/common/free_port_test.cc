#include "common/free_port.h"

#include <doctest/doctest.h>

#include <set>
#include <vector>

#include "common/error.h"
#include "common/socket.h"

using namespace ddp;

TEST_CASE("ephemeral_port_range: the kernel's, a sane range") {
  const auto [lo, hi] = net::ephemeral_port_range();
  CHECK(lo >= 1);
  CHECK(hi <= 65535);
  CHECK(lo <= hi);
}

TEST_CASE("parse_port_range: the kernel's text, or its default for anything else") {
  using R = std::pair<int, int>;
  CHECK(net::parse_port_range("32768\t60999\n") == R{32768, 60999});
  CHECK(net::parse_port_range("1024 65535") == R{1024, 65535});
  for (const char* bad : {"", "\n", "garbage", "40000", "40000 x", "0 100", "100 70000", "50000 40000",
                          "-1 5", "99999999999999999999 5", "1024 2048 4096", "1024 2048x"}) {
    CAPTURE(bad);
    CHECK(net::parse_port_range(bad) == R{32768, 60999});
  }
}

TEST_CASE("pick_free_port: outside the ephemeral range, bindable, not always the same") {
  const auto [lo, hi] = net::ephemeral_port_range();
  const bool gap = lo - 10000 >= 1000 || 65535 - hi >= 1000;
  std::set<int> seen;
  for (int i = 0; i < 20; ++i) {
    const int p = net::pick_free_port();
    CAPTURE(p);
    if (gap) CHECK((p < lo || p > hi));
    CHECK(p >= 1024);
    // Free: it binds on every interface now.
    CHECK_NOTHROW(
        net::listen_tcp({.host = "", .port = static_cast<uint16_t>(p), .backlog = 1, .reuse_addr = false}));
    seen.insert(p);
  }
  CHECK(seen.size() > 10);  // random, not the first free one each time
}

TEST_CASE("pick_free_port(2): the port and the next are both free") {
  for (int i = 0; i < 10; ++i) {
    const int p = net::pick_free_port(2);
    CAPTURE(p);
    Fd a = net::listen_tcp({.host = "", .port = static_cast<uint16_t>(p), .backlog = 1, .reuse_addr = false});
    Fd b = net::listen_tcp(
        {.host = "", .port = static_cast<uint16_t>(p + 1), .backlog = 1, .reuse_addr = false});
    CHECK(net::local_port(b.get()) == p + 1);
  }
}

TEST_CASE("pick_free_port never returns a port something listens on") {
  // Hold 200 ports of the range it picks from; none of them comes back.
  const auto [lo, hi] = net::ephemeral_port_range();
  const int first = lo - 10000 >= 65535 - hi ? 10000 : hi + 1;
  std::vector<Fd> held;
  std::set<int> busy;
  for (int p = first; p < first + 400 && held.size() < 200; ++p) {
    try {
      held.push_back(
          net::listen_tcp({.host = "", .port = static_cast<uint16_t>(p), .backlog = 1, .reuse_addr = false}));
      busy.insert(p);
    } catch (const Error&) {
    }
  }
  for (int i = 0; i < 200; ++i) CHECK(busy.count(net::pick_free_port()) == 0);
}
