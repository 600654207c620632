#include "common/socket.h"

#include <doctest/doctest.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sched.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <thread>

#include "common/error.h"
#include "private_namespaces.h"

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

TEST_CASE("TCP_NOTSENT_LOWAT: set on a TCP socket, refused (false) on another kind") {
  Fd listener = net::listen_tcp({"127.0.0.1", 0});
  Fd c = net::connect_tcp({"127.0.0.1", net::local_port(listener.get())}, Deadline(Millis(5000)));
  CHECK(net::set_notsent_lowat(c.get(), 65536));
  int v = 0;
  socklen_t len = sizeof(v);
  REQUIRE(::getsockopt(c.get(), IPPROTO_TCP, TCP_NOTSENT_LOWAT, &v, &len) == 0);
  CHECK(v == 65536);
  int sv[2];
  REQUIRE(::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) == 0);
  Fd a(sv[0]), b(sv[1]);
  CHECK_FALSE(net::set_notsent_lowat(a.get(), 65536));
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

TEST_CASE("same-host key: boot id plus IPC and network namespaces") {
  const std::string key = net::same_host_key();
  CHECK(key.starts_with(net::boot_id()));
  CHECK(key.find("/ipc:[") != std::string::npos);
  CHECK(key.find("/net:[") != std::string::npos);
  CHECK(key == net::same_host_key());
}

// A process in its own IPC namespace (a container without --ipc=host) has no /dev/shm in common
// with us: its key must differ. Needs CAP_SYS_ADMIN: its own ctest, Skipped elsewhere.
TEST_CASE("same-host key: a process in another IPC namespace has another" *
          doctest::skip(!ddp::test::can_unshare_ipc())) {
  const std::string key = net::same_host_key();
  int p[2];
  REQUIRE(::pipe(p) == 0);
  pid_t child = ::fork();
  REQUIRE(child >= 0);
  if (child == 0) {
    ::close(p[0]);
    std::string out = ::unshare(CLONE_NEWIPC) == 0 ? net::same_host_key() : "skip";
    [[maybe_unused]] ssize_t n = ::write(p[1], out.data(), out.size());
    ::_exit(0);
  }
  ::close(p[1]);
  std::string got;
  char buf[512];
  ssize_t n;
  while ((n = ::read(p[0], buf, sizeof buf)) > 0) got.append(buf, static_cast<size_t>(n));
  ::close(p[0]);
  ::waitpid(child, nullptr, 0);
  REQUIRE_MESSAGE(got != "skip", "unshare(CLONE_NEWIPC) refused where the probe was allowed it");
  CHECK(got.starts_with(net::boot_id()));
  CHECK(got != key);
}
