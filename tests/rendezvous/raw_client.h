#pragma once
// A raw protocol client for tests: speaks frames directly so tests can send what TCPStore
// never would (garbage, truncated frames, wrong versions) and park many waits cheaply.
#include <optional>
#include <string>
#include <vector>

#include "common/auth.h"
#include "common/error.h"
#include "common/socket.h"
#include "rendezvous/tcp_store_handshake.h"
#include "rendezvous/tcp_store_protocol.h"

namespace ddp::rdzv::testing {

class RawClient {
 public:
  explicit RawClient(uint16_t port, Millis timeout = Millis(30'000))
      : fd_(net::connect_tcp({"127.0.0.1", port}, Deadline(timeout))) {}

  int fd() const { return fd_.get(); }
  void send_bytes(const void* data, size_t size) {
    net::send_all(fd_.get(), data, size, Deadline(Millis(30'000)), "raw client");
  }
  void send_frame(proto::Writer& w) {
    const auto& f = w.finish();
    send_bytes(f.data(), f.size());
  }
  // The whole handshake but its last reply (Ok or Error: read it with read_frame()). With
  // another version only the hello is sent (the server answers kBadVersion).
  void hello(const std::string& token, uint16_t version = proto::kVersion) {
    send_hello(version);
    if (version == proto::kVersion) finish_hello(token);
  }
  // The two halves, for tests that must not block between them.
  void send_hello(uint16_t version = proto::kVersion) {
    nonce_ = auth::random_nonce();
    auto f = proto::hello_frame(nonce_, version);
    send_bytes(f.data(), f.size());
  }
  void finish_hello(const std::string& token) {
    auto reply = read_frame();
    if (!reply) DDP_THROW(NetworkError, "raw client: no challenge from the server");
    auto c = proto::parse_challenge(reply->data(), reply->size());
    auto f = proto::auth_frame(token, nonce_, c.server_nonce);
    send_bytes(f.data(), f.size());
  }
  // The next reply payload (type byte first); nullopt when the server closed the connection.
  std::optional<std::vector<uint8_t>> read_frame(Millis timeout = Millis(30'000)) {
    Deadline d(timeout);
    uint8_t header[4];
    try {
      net::recv_all(fd_.get(), header, 4, d, "raw client");
      std::vector<uint8_t> payload(proto::decode_length(header));
      net::recv_all(fd_.get(), payload.data(), payload.size(), d, "raw client");
      return payload;
    } catch (const NetworkError&) {
      return std::nullopt;
    }
  }
  // True when the server closes the connection (EOF) before the timeout (replies are skipped).
  bool closed_by_server(Millis timeout = Millis(30'000)) {
    while (read_frame(timeout)) {
    }
    return true;
  }

 private:
  Fd fd_;
  auth::Nonce nonce_{};
};

}  // namespace ddp::rdzv::testing
