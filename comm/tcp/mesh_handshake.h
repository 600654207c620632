#pragma once
// The tcp backend's connection handshake (PeerMesh), version 2: a mutual proof of the job token
// (common/auth.h); the token never crosses the wire.
//   connector -> acceptor  hello      "DDPTCP02" | u32 rank | u32 size | u32 n | group (n bytes,
//                                     n <= kMaxGroupName) | nonce (32)
//   acceptor -> connector  challenge  nonce (32) | proof (32)
//   connector -> acceptor  proof (32)           only when the acceptor's proof was right
//   acceptor -> connector  verdict    u32 status (0: accepted) | u32 n | message (n bytes)
// Integers little-endian. Proofs: auth::prove(token, kAcceptorLabel / kConnectorLabel, connector
// nonce, acceptor nonce). The acceptor proves first (a program squatting on a rank's port learns
// nothing); only then do group, size and rank count. AcceptorHandshake: the acceptor's side as a
// pure state machine over bytes (fuzzable) that never takes bytes past the handshake.
#include <cstdint>
#include <string>
#include <vector>

#include "common/auth.h"
#include "common/deadline.h"

namespace ddp::comm::tcp {

inline constexpr char kConnectorLabel[] = "ddp-tcp/2 connector";
inline constexpr char kAcceptorLabel[] = "ddp-tcp/2 acceptor";
inline constexpr uint32_t kMaxGroupName = 4096;

struct HandshakeIdentity {
  int rank = 0;
  int size = 1;
  std::string job_token;
  std::string group = "world";
};

// The connector's side, blocking until `deadline`: NetworkError naming `peer` when the acceptor
// cannot prove the token or refuses; TimeoutError when it does not answer in time.
void connect_handshake(int fd, const HandshakeIdentity& self, int peer, const Deadline& deadline);

class AcceptorHandshake {
 public:
  enum class State { kHello, kProof, kAccepted, kRefused };
  // `have[r]`: rank r is already connected (a second connection claiming it is refused).
  AcceptorHandshake(const HandshakeIdentity& self, const std::vector<bool>* have);

  // Bytes the current message still needs (0 once accepted or refused).
  size_t wanted() const;
  // Consumes `size` <= wanted() bytes; returns what to send to the connector (often nothing).
  // InvalidArgument when the bytes are no hello of this protocol (bad magic, oversize group).
  std::string feed(const uint8_t* data, size_t size);

  State state() const { return state_; }
  int peer_rank() const { return peer_rank_; }  // once the hello is in
  const std::string& refusal() const { return refusal_; }

 private:
  std::string on_hello();
  std::string on_proof();

  HandshakeIdentity self_;
  const std::vector<bool>* have_;
  State state_ = State::kHello;
  std::string buf_;
  uint32_t group_len_ = 0;
  int peer_rank_ = -1;
  int peer_size_ = 0;
  std::string peer_group_;
  auth::Nonce connector_nonce_{};
  auth::Nonce acceptor_nonce_{};
  std::string refusal_;
};

}  // namespace ddp::comm::tcp
