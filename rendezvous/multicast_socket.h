#pragma once
// A UDP socket joined to one IP multicast group (IPv4 or IPv6): bound to the group's port with
// SO_REUSEADDR/SO_REUSEPORT (so every participant on a host can join), the membership on the
// chosen interface, TTL/hop limit, loopback on (participants on the same host hear each other).
// Datagrams are sent to the group only; nothing else is ever addressed.
//
// Errors: setup failures are NetworkError naming the group, the interface and the call;
// InvalidArgument for an address that is not a multicast group or an unknown interface.
// One thread at a time per socket; the fd is non-blocking (poll it, then receive()).
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "common/fd.h"

namespace ddp::rdzv::mcast {

struct SocketOptions {
  std::string group;  // 239.x.y.z or ff15::... (IPv6 without brackets)
  uint16_t port = 0;
  int ttl = 1;            // IPv4 TTL / IPv6 hop limit: 1 stays on the local subnet
  std::string interface;  // name ("eth0") or, for IPv4, one of its addresses; empty: the kernel's choice
  bool loopback = true;   // IP_MULTICAST_LOOP / IPV6_MULTICAST_LOOP
};

class MulticastSocket {
 public:
  explicit MulticastSocket(const SocketOptions& options);
  int fd() const { return fd_.get(); }
  bool ipv6() const { return v6_; }
  // Best effort (UDP): false when the kernel refused it (ENOBUFS, ENETUNREACH...), errno kept.
  bool send(std::span<const uint8_t> bytes) const;
  // One datagram into `buffer` (its size the maximum read); nullopt when none is waiting.
  // `truncated` tells a datagram longer than the buffer.
  struct Received {
    size_t size = 0;
    bool truncated = false;
    std::string from;  // sender's address
  };
  std::optional<Received> receive(std::span<uint8_t> buffer) const;

 private:
  Fd fd_;
  bool v6_ = false;
  std::vector<uint8_t> dest_;  // sockaddr of the group
};

}  // namespace ddp::rdzv::mcast
