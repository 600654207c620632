#include "common/socket.h"

#include <doctest/doctest.h>
#include <sys/socket.h>

#include <thread>

#include "common/error.h"

using namespace ddp;

TEST_CASE("parse_endpoint") {
  auto a = net::parse_endpoint("node1:29500");
  CHECK(a.host == "node1");
  CHECK(a.port == 29500);
  auto b = net::parse_endpoint("[::1]:80");
  CHECK(b.host == "::1");
  CHECK(b.str() == "[::1]:80");
  CHECK(net::parse_endpoint("host", 7).port == 7);
  CHECK_THROWS_AS(net::parse_endpoint("host:99999"), InvalidArgument);
  CHECK_THROWS_AS(net::parse_endpoint(":80"), InvalidArgument);
  CHECK_THROWS_AS(net::parse_endpoint("[::1"), InvalidArgument);
}

TEST_CASE("listen, connect, send and receive with deadlines") {
  Fd listener = net::listen_tcp({"127.0.0.1", 0});
  uint16_t port = net::local_port(listener.get());
  CHECK(port != 0);
  std::thread server([&] {
    Fd conn(::accept4(listener.get(), nullptr, nullptr, SOCK_CLOEXEC));
    char buf[5];
    net::recv_all(conn.get(), buf, 5, Deadline(Millis(5000)), "server");
    net::send_all(conn.get(), buf, 5, Deadline(Millis(5000)), "server");
  });
  Fd c = net::connect_tcp({"127.0.0.1", port}, Deadline(Millis(5000)));
  net::send_all(c.get(), "hello", 5, Deadline(Millis(5000)), "client");
  char back[5];
  net::recv_all(c.get(), back, 5, Deadline(Millis(5000)), "client");
  CHECK(std::string(back, 5) == "hello");
  server.join();
  // The server closed: the next read is a NetworkError, not a hang.
  CHECK_THROWS_AS(net::recv_all(c.get(), back, 1, Deadline(Millis(5000)), "client"), NetworkError);
}

TEST_CASE("a silent peer is a TimeoutError; nobody listening times out the connect") {
  Fd listener = net::listen_tcp({"127.0.0.1", 0});
  uint16_t port = net::local_port(listener.get());
  Fd c = net::connect_tcp({"127.0.0.1", port}, Deadline(Millis(2000)));
  char b;
  CHECK_THROWS_AS(net::recv_all(c.get(), &b, 1, Deadline(Millis(50)), "silent"), TimeoutError);
  listener.reset();
  CHECK_THROWS_AS(net::connect_tcp({"127.0.0.1", port}, Deadline(Millis(200))), TimeoutError);
}

TEST_CASE("host identity") {
  CHECK_FALSE(net::hostname().empty());
  CHECK(net::boot_id() == net::boot_id());
}
