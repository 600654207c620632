#pragma once
// The TCPStore handshake (protocol version 2): mutual challenge-response on the job token
// (common/auth.h); the token itself never crosses the wire, and the client checks the server's
// proof before proving anything itself, so a program squatting on the store's port learns nothing
// and is named as such. Before authentication a client may send frames of at most
// kMaxHandshakeFrame bytes. ServerHandshake is the server's side as a pure state machine over
// frame payloads (no socket): fuzzable on a byte buffer.
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "common/auth.h"
#include "rendezvous/tcp_store_protocol.h"

namespace ddp::rdzv::proto {

inline constexpr char kServerLabel[] = "ddp-store/2 server";
inline constexpr char kClientLabel[] = "ddp-store/2 client";
// Room for a v2 hello or auth (43 and 37 bytes) and for a v1 hello with a short token, so an
// old client still gets a clear kBadVersion instead of a dropped connection.
inline constexpr size_t kMaxHandshakeFrame = 256;

// Client side.
std::vector<uint8_t> hello_frame(const auth::Nonce& client_nonce, uint16_t version = kVersion);
struct Challenge {
  auth::Nonce server_nonce{};
  auth::Digest proof{};
};
// `payload` is a whole reply payload, type byte first. ProtocolError when it is no Challenge.
Challenge parse_challenge(const uint8_t* payload, size_t size);
std::vector<uint8_t> auth_frame(const std::string& token, const auth::Nonce& client_nonce,
                                const auth::Nonce& server_nonce);

// Server side: one per connection until it is authenticated.
class ServerHandshake {
 public:
  enum class Outcome { kContinue, kAuthenticated, kRefused };
  struct Step {
    std::vector<uint8_t> reply;  // the frame to send (always one)
    Outcome outcome = Outcome::kContinue;
    std::string refusal;  // why, when kRefused (for the server's log)
  };
  explicit ServerHandshake(std::string token) : token_(std::move(token)) {}
  // Handles one frame payload (type byte first). ProtocolError when the frame is malformed or
  // out of turn; after kAuthenticated or kRefused no more frames are expected.
  Step on_frame(const uint8_t* payload, size_t size);

 private:
  Step on_hello(Reader& r);
  Step on_auth(Reader& r);

  std::string token_;
  enum class State { kHello, kAuth, kDone } state_ = State::kHello;
  auth::Nonce client_nonce_{};
  auth::Nonce server_nonce_{};
};

}  // namespace ddp::rdzv::proto
