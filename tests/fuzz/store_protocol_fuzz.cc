// The TCPStore server's frame and request decoding, through its public face: one server for
// the whole run, each input sent as the byte stream of one client connection (then EOF). The
// server must answer or close that connection, never crash, hang or stop serving others.
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdlib>

#include "common/deadline.h"
#include "common/log.h"
#include "common/socket.h"
#include "rendezvous/tcp_store_server.h"

namespace {

ddp::rdzv::TCPStoreServer& server() {
  static ddp::rdzv::TCPStoreServer* s = [] {
    ddp::set_log_level(spdlog::level::off);  // refused frames are logged: expected here
    return new ddp::rdzv::TCPStoreServer({.host = "127.0.0.1", .port = 0, .job_token = ""});
  }();
  return *s;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  auto& s = server();
  ddp::Fd fd = ddp::net::connect_tcp({"127.0.0.1", s.port()}, ddp::Deadline(ddp::Millis(10'000)));
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
