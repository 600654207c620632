// The TCPStore server's frame and request decoding, through its public face: one server for
// the whole run, each input sent as the byte stream of one client connection (then EOF). The
// server must answer or close that connection, never crash, hang or stop serving others.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdlib>

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

// A connection from a different loopback source address each run (127.1.0.0/16, in turn): the
// client closes first, so each run leaves its port in TIME_WAIT for a minute, and thousands of
// runs a second from one address exhaust its ~28k ephemeral ports within seconds (connect then
// fails: the harness's fault, not the server's).
ddp::Fd connect_from_next_address(uint16_t port) {
  static uint32_t next = 0;
  ddp::Fd fd(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
  if (!fd) std::abort();
  sockaddr_in from{};
  from.sin_family = AF_INET;
  from.sin_addr.s_addr = htonl(0x7f010000u | (next++ & 0xffffu));
  sockaddr_in to{};
  to.sin_family = AF_INET;
  to.sin_port = htons(port);
  to.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (::bind(fd.get(), reinterpret_cast<sockaddr*>(&from), sizeof from) != 0 ||
      ::connect(fd.get(), reinterpret_cast<sockaddr*>(&to), sizeof to) != 0) {
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
    if (n <= 0) break;  // the server closed on a bad frame: fine
    off += static_cast<size_t>(n);
  }
  ::shutdown(fd.get(), SHUT_WR);
  // The server answers what it can and closes once the client is gone; a pending wait ends
  // with the connection. 10 s without EOF is a hang: abort so libFuzzer keeps the input.
  char buf[65536];
  while (true) {
    pollfd p{fd.get(), POLLIN, 0};
    if (::poll(&p, 1, 10'000) <= 0) std::abort();
    ssize_t n = ::recv(fd.get(), buf, sizeof buf, 0);
    if (n <= 0) break;
  }
  return 0;
}
