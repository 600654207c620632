#include "rendezvous/tcp_store_handshake.h"

#include <algorithm>
#include <array>

// The exchange:
//   client -> server  Hello     u32 magic | u16 version | bytes client_nonce (32)
//   server -> client  Challenge bytes server_nonce (32) | bytes server_proof (32)
//                     (or Error{kBadVersion} and close, checked before anything else is read)
//   client -> server  Auth      bytes client_proof (32)
//   server -> client  Ok{u16 version}, or Error{kRefused} and close
// server_proof = prove(token, kServerLabel, client_nonce, server_nonce), client_proof likewise
// with kClientLabel. A server without a token accepts any client proof, but its own proof (made
// with the empty token) convinces only clients without one.

namespace ddp::rdzv::proto {
namespace {

// A nonce or a proof: bytes of exactly N; `what` names it in the error.
template <size_t N>
std::array<uint8_t, N> read_exactly(Reader& r, const char* what) {
  Bytes b = r.bytes(N);
  if (b.size() != N) DDP_THROW(rdzv::proto::ProtocolError, what, " of ", b.size(), " bytes");
  std::array<uint8_t, N> out{};
  std::copy(b.begin(), b.end(), out.begin());
  return out;
}

auth::Nonce read_nonce(Reader& r) { return read_exactly<auth::kNonceSize>(r, "nonce"); }
auth::Digest read_digest(Reader& r) { return read_exactly<auth::kDigestSize>(r, "proof"); }

std::vector<uint8_t> error_frame(ErrorCode code, const std::string& message) {
  Writer w(MsgType::kError);
  w.u8(static_cast<uint8_t>(code)).str(message);
  return w.finish();
}

}  // namespace

std::vector<uint8_t> hello_frame(const auth::Nonce& client_nonce, uint16_t version) {
  Writer w(MsgType::kHello);
  w.u32(kMagic).u16(version).bytes(client_nonce.data(), client_nonce.size());
  return w.finish();
}

Challenge parse_challenge(const uint8_t* payload, size_t size) {
  Reader r(payload, size);
  MsgType type = r.type();
  if (type != MsgType::kChallenge) {
    DDP_THROW(rdzv::proto::ProtocolError, "expected a challenge, got message type ", static_cast<int>(type));
  }
  Challenge c;
  c.server_nonce = read_nonce(r);
  c.proof = read_digest(r);
  r.done();
  return c;
}

std::vector<uint8_t> auth_frame(const std::string& token, const auth::Nonce& client_nonce,
                                const auth::Nonce& server_nonce) {
  auth::Digest proof = auth::prove(token, kClientLabel, client_nonce, server_nonce);
  Writer w(MsgType::kAuth);
  w.bytes(proof.data(), proof.size());
  return w.finish();
}

ServerHandshake::Step ServerHandshake::on_frame(const uint8_t* payload, size_t size) {
  if (size > kMaxHandshakeFrame) {
    DDP_THROW(rdzv::proto::ProtocolError, "handshake frame of ", size, " bytes (limit ", kMaxHandshakeFrame,
              ")");
  }
  Reader r(payload, size);
  MsgType type = r.type();
  if (state_ == State::kHello && type == MsgType::kHello) return on_hello(r);
  if (state_ == State::kAuth && type == MsgType::kAuth) return on_auth(r);
  DDP_THROW(rdzv::proto::ProtocolError, "unexpected ", type_name(type), " frame (type ",
            static_cast<int>(type), ") during the handshake");
}

ServerHandshake::Step ServerHandshake::on_hello(Reader& r) {
  uint32_t magic = r.u32();
  if (magic != kMagic) DDP_THROW(rdzv::proto::ProtocolError, "bad magic in hello: ", magic);
  uint16_t version = r.u16();
  Step step;
  if (version != kVersion) {  // the rest of the frame is in that version's format: unread
    state_ = State::kDone;
    step.outcome = Outcome::kRefused;
    step.refusal = detail::str("protocol version ", version, " (server speaks ", kVersion, ")");
    step.reply = error_frame(
        ErrorCode::kBadVersion,
        detail::str("protocol version ", version, " is not supported (server speaks ", kVersion, ")"));
    return step;
  }
  client_nonce_ = read_nonce(r);
  r.done();
  server_nonce_ = auth::random_nonce();
  auth::Digest proof = auth::prove(token_, kServerLabel, client_nonce_, server_nonce_);
  Writer w(MsgType::kChallenge);
  w.bytes(server_nonce_.data(), server_nonce_.size()).bytes(proof.data(), proof.size());
  step.reply = w.finish();
  state_ = State::kAuth;
  return step;
}

ServerHandshake::Step ServerHandshake::on_auth(Reader& r) {
  auth::Digest proof = read_digest(r);
  r.done();
  state_ = State::kDone;
  Step step;
  if (!token_.empty() &&
      !auth::equal(proof, auth::prove(token_, kClientLabel, client_nonce_, server_nonce_))) {
    step.outcome = Outcome::kRefused;
    step.refusal = "wrong job token";
    step.reply = error_frame(ErrorCode::kRefused, "the job token was refused");
    return step;
  }
  step.outcome = Outcome::kAuthenticated;
  Writer w(MsgType::kOk);
  w.u16(kVersion);
  step.reply = w.finish();
  return step;
}

}  // namespace ddp::rdzv::proto
