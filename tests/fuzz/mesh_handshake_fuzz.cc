// The tcp backend's acceptor handshake (comm/tcp/mesh_handshake.h): AcceptorHandshake::feed is
// the one judge of what a stranger on a rank's port sends before it is a peer. Input: byte 0
// flags (bit 0: answer the challenge with the right proof, so the checks behind the MAC are
// fuzzed too; bits 1-3: chunk size 1 << n), byte 1 this rank and size, byte 2 which ranks are
// connected already, then the connector's bytes. Only InvalidArgument may escape feed; what it
// accepts must be a peer the mesh can use, and it never asks for more than one message.
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "comm/tcp/mesh_handshake.h"
#include "common/error.h"

using namespace ddp;
using namespace ddp::comm::tcp;

namespace {

constexpr size_t kHelloFixed = 20;  // magic, rank, size, group length
const char kToken[] = "fuzz-token";

void check(bool ok) {
  if (!ok) __builtin_trap();
}

// The proof a connector holding the token would send, from the hello it sent and the challenge.
std::string right_proof(const std::string& hello, const std::string& challenge) {
  uint32_t group_len = 0;
  std::memcpy(&group_len, hello.data() + 16, 4);
  auth::Nonce connector{}, acceptor{};
  std::memcpy(connector.data(), hello.data() + kHelloFixed + group_len, connector.size());
  std::memcpy(acceptor.data(), challenge.data(), acceptor.size());
  const auth::Digest d = auth::prove(kToken, kConnectorLabel, connector, acceptor);
  return std::string(reinterpret_cast<const char*>(d.data()), d.size());
}

void check_end(const AcceptorHandshake& h, const HandshakeIdentity& self, const std::vector<bool>& have,
               const std::string& reply) {
  check(h.wanted() == 0);
  check(reply.size() >= 8);
  if (h.state() == AcceptorHandshake::State::kAccepted) {
    check(h.refusal().empty());
    check(h.peer_rank() > self.rank && h.peer_rank() < self.size &&
          !have[static_cast<size_t>(h.peer_rank())]);
  } else {
    check(!h.refusal().empty());
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 3) return 0;
  const bool answer_right = (data[0] & 1) != 0;
  const size_t chunk = size_t{1} << ((data[0] >> 1) & 7);
  HandshakeIdentity self;
  self.rank = data[1] % 4;
  self.size = self.rank + 1 + (data[1] >> 2) % 8;
  self.job_token = kToken;
  self.group = "world";
  std::vector<bool> have(static_cast<size_t>(self.size));
  for (size_t r = 0; r < have.size(); ++r) have[r] = ((data[2] >> (r % 8)) & 1) != 0;
  AcceptorHandshake h(self, &have);
  const uint8_t* p = data + 3;
  size_t left = size - 3;
  std::string hello, reply;
  try {
    while (h.wanted() > 0) {
      const size_t want = h.wanted();
      if (h.state() == AcceptorHandshake::State::kProof && answer_right) {
        check(want == auth::kDigestSize);
        const std::string proof = right_proof(hello, reply);
        reply = h.feed(reinterpret_cast<const uint8_t*>(proof.data()), proof.size());
        continue;
      }
      if (left == 0) return 0;
      const size_t n = std::min({want, left, chunk});
      const bool in_hello = h.state() == AcceptorHandshake::State::kHello;
      if (in_hello) hello.append(reinterpret_cast<const char*>(p), n);
      const std::string out = h.feed(p, n);
      p += n;
      left -= n;
      if (in_hello && h.state() == AcceptorHandshake::State::kProof) {
        check(out.size() == auth::kNonceSize + auth::kDigestSize);  // the challenge
      } else if (h.state() == AcceptorHandshake::State::kHello) {
        check(out.empty());
      }
      if (!out.empty()) reply = out;
    }
  } catch (const InvalidArgument&) {
    return 0;  // not a hello of this protocol: the connection is dropped
  }
  check_end(h, self, have, reply);
  return 0;
}
