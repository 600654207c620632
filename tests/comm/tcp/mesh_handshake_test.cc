// The tcp backend's handshake as a pure state machine (the acceptor's side), byte by byte.
#include "comm/tcp/mesh_handshake.h"

#include <doctest/doctest.h>

#include "common/error.h"

using namespace ddp;
using namespace ddp::comm::tcp;

namespace {

void put_u32(std::string& out, uint32_t v) {
  for (int i = 0; i < 4; ++i) out.push_back(static_cast<char>((v >> (8 * i)) & 0xff));
}

std::string hello(int rank, int size, const std::string& group, const auth::Nonce& nonce) {
  std::string h("DDPTCP02", 8);
  put_u32(h, static_cast<uint32_t>(rank));
  put_u32(h, static_cast<uint32_t>(size));
  put_u32(h, static_cast<uint32_t>(group.size()));
  h += group;
  h.append(reinterpret_cast<const char*>(nonce.data()), nonce.size());
  return h;
}

// Feeds one byte at a time, as a slow connector would; returns what the acceptor answered.
std::string trickle(AcceptorHandshake& h, const std::string& bytes) {
  std::string out;
  for (char c : bytes) {
    REQUIRE(h.wanted() > 0);
    out += h.feed(reinterpret_cast<const uint8_t*>(&c), 1);
  }
  return out;
}

std::string proof_of(const std::string& token, const auth::Nonce& mine, const std::string& challenge) {
  auth::Nonce theirs{};
  std::copy(challenge.begin(), challenge.begin() + 32, theirs.begin());
  auto p = auth::prove(token, kConnectorLabel, mine, theirs);
  return std::string(reinterpret_cast<const char*>(p.data()), p.size());
}

}  // namespace

TEST_CASE("a connector that proves the token is accepted; the acceptor proves it first") {
  std::vector<bool> have(4, false);
  AcceptorHandshake h({0, 4, "tok", "g"}, &have);
  auto nonce = auth::random_nonce();
  std::string challenge = trickle(h, hello(2, 4, "g", nonce));
  REQUIRE(challenge.size() == 64);
  auth::Nonce acceptor{};
  std::copy(challenge.begin(), challenge.begin() + 32, acceptor.begin());
  auto expected = auth::prove("tok", kAcceptorLabel, nonce, acceptor);
  CHECK(auth::equal(challenge.data() + 32, expected.data(), 32));
  CHECK(h.state() == AcceptorHandshake::State::kProof);
  std::string verdict = trickle(h, proof_of("tok", nonce, challenge));
  CHECK(h.state() == AcceptorHandshake::State::kAccepted);
  CHECK(h.peer_rank() == 2);
  CHECK(verdict == std::string(8, '\0'));
  CHECK(h.wanted() == 0);
}

TEST_CASE("refusals: wrong token, wrong group, taken or impossible rank") {
  std::vector<bool> have(4, false);
  have[3] = true;
  struct Case {
    std::string token;
    int rank;
    std::string group;
    const char* why;
  } cases[] = {{"bad", 2, "g", "job token"},
               {"tok", 2, "other", "group"},
               {"tok", 3, "g", "unexpected rank"},
               {"tok", 0, "g", "unexpected rank"},
               {"tok", -1, "g", "unexpected rank"}};
  for (const auto& c : cases) {
    AcceptorHandshake h({0, 4, "tok", "g"}, &have);
    auto nonce = auth::random_nonce();
    std::string challenge = trickle(h, hello(c.rank, 4, c.group, nonce));
    std::string verdict = trickle(h, proof_of(c.token, nonce, challenge));
    CAPTURE(c.why);
    CHECK(h.state() == AcceptorHandshake::State::kRefused);
    CHECK(h.refusal().find(c.why) != std::string::npos);
    CHECK(verdict[0] == 1);
  }
}

TEST_CASE("garbage is InvalidArgument, before any large buffer") {
  AcceptorHandshake bad_magic({0, 2, "tok", "g"}, nullptr);
  std::string junk(20, 'x');
  CHECK_THROWS_AS(bad_magic.feed(reinterpret_cast<const uint8_t*>(junk.data()), junk.size()),
                  InvalidArgument);
  AcceptorHandshake huge_group({0, 2, "tok", "g"}, nullptr);
  std::string h("DDPTCP02", 8);
  put_u32(h, 1);
  put_u32(h, 2);
  put_u32(h, 0xffffffffu);
  CHECK_THROWS_AS(huge_group.feed(reinterpret_cast<const uint8_t*>(h.data()), h.size()), InvalidArgument);
  AcceptorHandshake greedy({0, 2, "tok", "g"}, nullptr);
  std::string more(100, 'x');
  CHECK_THROWS_AS(greedy.feed(reinterpret_cast<const uint8_t*>(more.data()), more.size()), InvalidArgument);
}
