#pragma once
// PeerMesh: one authenticated TCP connection between every pair of ranks of a group.
// Each rank listens on an ephemeral port and publishes "tcp/addr/<rank>" (port, boot id, pid,
// host name, interface addresses) in the group's store. Rank i connects to every j < i and
// accepts every j > i; each connection opens with the handshake of mesh_handshake.h (a mutual
// proof of the job token, then the group name, rank and world size), and the acceptor answers
// OK or refuses (wrong token, wrong group or size, unexpected rank). A refused connector throws
// NetworkError naming the peer; an acceptor drops refused or malformed connections and keeps
// waiting for the real peer. The acceptor serves every pending handshake at once (poll), each
// bounded by kTcpHandshakeTimeout and at most kMaxPendingHandshakes of them (the oldest is
// dropped), so connections from strangers neither delay nor fail the real ranks.
// Peers with our boot id are reached over loopback first. Everything is bounded by the deadline
// (TimeoutError naming the ranks that did not connect).
#include <cstdint>
#include <string>
#include <vector>

#include "comm/tcp/mesh_handshake.h"
#include "common/deadline.h"
#include "common/fd.h"
#include "rendezvous/store.h"

namespace ddp::comm::tcp {

struct PeerAddress {
  uint16_t port = 0;
  std::string boot_id;  // net::same_host_key(): equal <=> shm and loopback are shared
  int64_t pid = 0;
  std::string host;
  std::vector<std::string> addrs;  // numeric; loopback last
  std::string encode() const;
  static PeerAddress decode(const std::string& text);  // InvalidArgument when malformed
  static PeerAddress local(uint16_t port);
};

using MeshOptions = HandshakeIdentity;
inline constexpr size_t kMaxPendingHandshakes = 64;

struct Mesh {
  std::vector<Fd> fds;             // fds[rank] is empty (self)
  std::vector<PeerAddress> peers;  // every rank's published address, self included
};

Mesh build_mesh(rdzv::Store& store, const MeshOptions& options, const Deadline& deadline);

}  // namespace ddp::comm::tcp
