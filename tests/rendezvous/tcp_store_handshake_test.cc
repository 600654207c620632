// The store handshake as a pure state machine: both proofs, refusals, frames out of turn.
#include "rendezvous/tcp_store_handshake.h"

#include <doctest/doctest.h>

using namespace ddp;
using namespace ddp::rdzv;
using namespace ddp::rdzv::proto;

namespace {

// A frame's payload (past its length prefix).
std::vector<uint8_t> payload(const std::vector<uint8_t>& frame) {
  return std::vector<uint8_t>(frame.begin() + kFrameHeaderSize, frame.end());
}

ServerHandshake::Step feed(ServerHandshake& h, const std::vector<uint8_t>& frame) {
  auto p = payload(frame);
  return h.on_frame(p.data(), p.size());
}

}  // namespace

TEST_CASE("both sides prove the token; the server's proof convinces only a holder of the token") {
  const std::string token = "tok";
  ServerHandshake h(token);
  auth::Nonce nonce = auth::random_nonce();
  auto step = feed(h, hello_frame(nonce));
  CHECK(step.outcome == ServerHandshake::Outcome::kContinue);
  auto reply = payload(step.reply);
  Challenge c = parse_challenge(reply.data(), reply.size());
  CHECK(auth::equal(c.proof, auth::prove(token, kServerLabel, nonce, c.server_nonce)));
  CHECK_FALSE(auth::equal(c.proof, auth::prove("other", kServerLabel, nonce, c.server_nonce)));
  step = feed(h, auth_frame(token, nonce, c.server_nonce));
  CHECK(step.outcome == ServerHandshake::Outcome::kAuthenticated);
  CHECK(static_cast<MsgType>(payload(step.reply)[0]) == MsgType::kOk);
}

TEST_CASE("a wrong proof is refused; a replayed proof does not fit a fresh server nonce") {
  ServerHandshake first("tok");
  auth::Nonce nonce = auth::random_nonce();
  auto reply = payload(feed(first, hello_frame(nonce)).reply);
  Challenge c = parse_challenge(reply.data(), reply.size());
  auto proof = auth_frame("tok", nonce, c.server_nonce);
  CHECK(feed(first, proof).outcome == ServerHandshake::Outcome::kAuthenticated);

  ServerHandshake second("tok");
  feed(second, hello_frame(nonce));  // same client nonce, fresh server nonce
  CHECK(feed(second, proof).outcome == ServerHandshake::Outcome::kRefused);

  ServerHandshake third("tok");
  auto r3 = payload(feed(third, hello_frame(nonce)).reply);
  Challenge c3 = parse_challenge(r3.data(), r3.size());
  auto step = feed(third, auth_frame("wrong", nonce, c3.server_nonce));
  CHECK(step.outcome == ServerHandshake::Outcome::kRefused);
  CHECK(static_cast<ErrorCode>(payload(step.reply)[1]) == ErrorCode::kRefused);
}

TEST_CASE("another version gets kBadVersion; frames out of turn and garbage are ProtocolErrors") {
  ServerHandshake h("tok");
  Writer v1(MsgType::kHello);
  v1.u32(kMagic).u16(1).str("token-in-clear");
  auto step = feed(h, v1.finish());
  CHECK(step.outcome == ServerHandshake::Outcome::kRefused);
  CHECK(static_cast<ErrorCode>(payload(step.reply)[1]) == ErrorCode::kBadVersion);

  ServerHandshake early("tok");
  CHECK_THROWS_AS(feed(early, auth_frame("tok", auth::random_nonce(), auth::random_nonce())), ProtocolError);
  ServerHandshake request("tok");
  Writer set(MsgType::kSet);
  set.str("k").str("v");
  CHECK_THROWS_AS(feed(request, set.finish()), ProtocolError);
  ServerHandshake short_nonce("tok");
  Writer w(MsgType::kHello);
  w.u32(kMagic).u16(kVersion).str("short");
  CHECK_THROWS_AS(feed(short_nonce, w.finish()), ProtocolError);
  ServerHandshake empty("tok");
  CHECK_THROWS_AS(empty.on_frame(nullptr, 0), ProtocolError);
}
