// The TCPStore server's frame and request decoding, through its public face: one server for
// the whole run, each input sent as the byte stream of one client connection (then EOF). The
// server must answer or close that connection, never crash, hang or stop serving others.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "common/fd.h"
#include "common/log.h"
#include "rendezvous/tcp_store_server.h"

namespace {

ddp::rdzv::TCPStoreServer& server() {
  static ddp::rdzv::TCPStoreServer* s = [] {
    ddp::set_log_level(spdlog::level::off);  // refused frames are logged: expected here
    return new ddp::rdzv::TCPStoreServer({.host = "127.0.0.1", .port = 0, .job_token = ""});
  }();
  return *s;
}

// poll() that goes on through signals (libFuzzer's timers interrupt blocking calls: EINTR is
// no hang); the remaining time shrinks with each retry.
int poll_one(int fd, short events, int timeout_ms) {
  const auto end = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
  while (true) {
    const auto left =
        std::chrono::duration_cast<std::chrono::milliseconds>(end - std::chrono::steady_clock::now());
    pollfd p{fd, events, 0};
    const int rc = ::poll(&p, 1, static_cast<int>(std::max<int64_t>(0, left.count())));
    if (rc >= 0 || errno != EINTR) return rc;
  }
}

// A connect() interrupted by a signal goes on in the background: wait for it and read its end.
bool finish_connect(int fd) {
  if (errno != EINTR && errno != EINPROGRESS) return false;
  if (poll_one(fd, POLLOUT, 10'000) <= 0) return false;
  int err = 0;
  socklen_t len = sizeof err;
  if (::getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len) != 0) return false;
  errno = err;
  return err == 0;
}

// A connection from a different loopback source address each run (127.64.0.0/10, in turn,
// never the same twice in a run): the client closes first, so each run leaves its 4-tuple in
// TIME_WAIT for a minute, and thousands of runs a second from one address exhaust its ephemeral
// ports within seconds (connect then fails: the harness's fault, not the server's). The port is
// left to connect (IP_BIND_ADDRESS_NO_PORT), which needs only the 4-tuple to be free.
ddp::Fd connect_from_next_address(uint16_t port) {
  static uint32_t next = 0;
  ddp::Fd fd(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
  if (!fd) std::abort();
  int one = 1;
  ::setsockopt(fd.get(), IPPROTO_IP, IP_BIND_ADDRESS_NO_PORT, &one, sizeof one);
  sockaddr_in from{};
  from.sin_family = AF_INET;
  from.sin_addr.s_addr = htonl(0x7f400000u | (next++ & 0x3fffffu));
  sockaddr_in to{};
  to.sin_family = AF_INET;
  to.sin_port = htons(port);
  to.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (::bind(fd.get(), reinterpret_cast<sockaddr*>(&from), sizeof from) != 0 ||
      (::connect(fd.get(), reinterpret_cast<sockaddr*>(&to), sizeof to) != 0 && !finish_connect(fd.get()))) {
    std::fprintf(stderr, "store_protocol_fuzz: cannot connect to the server: %s\n", std::strerror(errno));
    std::abort();
  }
  return fd;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  auto& s = server();
  ddp::Fd fd = connect_from_next_address(s.port());
  size_t off = 0;
  while (off < size) {
    ssize_t n = ::send(fd.get(), data + off, size - off, MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;  // the server closed on a bad frame: fine
    off += static_cast<size_t>(n);
  }
  ::shutdown(fd.get(), SHUT_WR);
  // The server answers what it can and closes once the client is gone; a pending wait ends
  // with the connection. 10 s without EOF is a hang: abort so libFuzzer keeps the input.
  char buf[65536];
  while (true) {
    if (poll_one(fd.get(), POLLIN, 10'000) <= 0) {
      const auto st = s.stats();
      std::fprintf(stderr,
                   "store_protocol_fuzz: no reply and no close for 10 s (server: %zu connections, %zu in "
                   "their handshake, %zu waiting, %zu buffered bytes)\n",
                   st.connections, st.unauthenticated, s.num_waiting(), st.buffered_bytes);
      std::abort();
    }
    ssize_t n = ::recv(fd.get(), buf, sizeof buf, 0);
    if (n <= 0) break;
  }
  return 0;
}
