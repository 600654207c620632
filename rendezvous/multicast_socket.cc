#include "rendezvous/multicast_socket.h"

#include <arpa/inet.h>
#include <net/if.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include <cerrno>
#include <cstring>

#include "common/error.h"
#include "common/host_addresses.h"
#include "rendezvous/init_method.h"

namespace ddp::rdzv::mcast {
namespace {

[[noreturn]] void fail(const SocketOptions& o, const char* call) {
  const int err = errno;
  DDP_THROW(NetworkError, "multicast group ", o.group, ":", o.port,
            o.interface.empty() ? std::string() : " on interface " + o.interface, ": ", call, ": ",
            std::strerror(err));
}

void set(int fd, int level, int name, const void* value, socklen_t size, const SocketOptions& o,
         const char* call) {
  if (::setsockopt(fd, level, name, value, size) != 0) fail(o, call);
}

unsigned interface_index(const SocketOptions& o) {
  if (o.interface.empty()) return 0;
  unsigned index = ::if_nametoindex(o.interface.c_str());
  if (index == 0)
    DDP_THROW(InvalidArgument, "multicast rendezvous: no network interface named '", o.interface, "'");
  return index;
}

}  // namespace

MulticastSocket::MulticastSocket(const SocketOptions& o) {
  if (!is_multicast_address(o.group))
    DDP_THROW(InvalidArgument, "'", o.group, "' is not an IP multicast group");
  if (o.ttl < 1 || o.ttl > 255) DDP_THROW(InvalidArgument, "multicast ttl ", o.ttl, " is not in 1..255");
  if (o.port == 0) DDP_THROW(InvalidArgument, "multicast group ", o.group, " needs a port");
  in6_addr g6{};
  in_addr g4{};
  v6_ = ::inet_pton(AF_INET6, o.group.c_str(), &g6) == 1;
  if (!v6_) ::inet_pton(AF_INET, o.group.c_str(), &g4);
  fd_ = Fd(::socket(v6_ ? AF_INET6 : AF_INET, SOCK_DGRAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0));
  if (!fd_) fail(o, "socket");
  const int one = 1;
  set(fd(), SOL_SOCKET, SO_REUSEADDR, &one, sizeof one, o, "SO_REUSEADDR");
  set(fd(), SOL_SOCKET, SO_REUSEPORT, &one, sizeof one, o, "SO_REUSEPORT");
  const int loop = o.loopback ? 1 : 0;
  if (v6_) {
    const unsigned index = interface_index(o);
    sockaddr_in6 a{};
    a.sin6_family = AF_INET6;
    a.sin6_port = htons(o.port);
    a.sin6_addr = g6;  // bound to the group: datagrams for other groups on this port stay out
    a.sin6_scope_id = index;
    if (::bind(fd(), reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) fail(o, "bind");
    ipv6_mreq m{};
    m.ipv6mr_multiaddr = g6;
    m.ipv6mr_interface = index;
    set(fd(), IPPROTO_IPV6, IPV6_JOIN_GROUP, &m, sizeof m, o, "IPV6_JOIN_GROUP");
    set(fd(), IPPROTO_IPV6, IPV6_MULTICAST_HOPS, &o.ttl, sizeof o.ttl, o, "IPV6_MULTICAST_HOPS");
    set(fd(), IPPROTO_IPV6, IPV6_MULTICAST_LOOP, &loop, sizeof loop, o, "IPV6_MULTICAST_LOOP");
    if (index != 0) set(fd(), IPPROTO_IPV6, IPV6_MULTICAST_IF, &index, sizeof index, o, "IPV6_MULTICAST_IF");
    dest_.resize(sizeof a);
    std::memcpy(dest_.data(), &a, sizeof a);
    return;
  }
  ip_mreqn m{};
  m.imr_multiaddr = g4;
  if (!o.interface.empty()) {
    in_addr local{};
    if (::inet_pton(AF_INET, o.interface.c_str(), &local) == 1)
      m.imr_address = local;
    else
      m.imr_ifindex = static_cast<int>(interface_index(o));
  }
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(o.port);
  a.sin_addr = g4;
  if (::bind(fd(), reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) fail(o, "bind");
  set(fd(), IPPROTO_IP, IP_ADD_MEMBERSHIP, &m, sizeof m, o, "IP_ADD_MEMBERSHIP");
  const unsigned char ttl = static_cast<unsigned char>(o.ttl);
  set(fd(), IPPROTO_IP, IP_MULTICAST_TTL, &ttl, sizeof ttl, o, "IP_MULTICAST_TTL");
  const unsigned char loop4 = static_cast<unsigned char>(loop);
  set(fd(), IPPROTO_IP, IP_MULTICAST_LOOP, &loop4, sizeof loop4, o, "IP_MULTICAST_LOOP");
  if (!o.interface.empty()) set(fd(), IPPROTO_IP, IP_MULTICAST_IF, &m, sizeof m, o, "IP_MULTICAST_IF");
  dest_.resize(sizeof a);
  std::memcpy(dest_.data(), &a, sizeof a);
}

bool MulticastSocket::send(std::span<const uint8_t> bytes) const {
  const ssize_t n =
      ::sendto(fd(), bytes.data(), bytes.size(), MSG_NOSIGNAL,
               reinterpret_cast<const sockaddr*>(dest_.data()), static_cast<socklen_t>(dest_.size()));
  return n == static_cast<ssize_t>(bytes.size());
}

std::optional<MulticastSocket::Received> MulticastSocket::receive(std::span<uint8_t> buffer) const {
  sockaddr_storage from{};
  socklen_t len = sizeof from;
  const ssize_t n =
      ::recvfrom(fd(), buffer.data(), buffer.size(), MSG_TRUNC, reinterpret_cast<sockaddr*>(&from), &len);
  if (n < 0) return std::nullopt;  // EAGAIN, or an error the next poll shows again: nothing to read now
  Received r;
  r.truncated = static_cast<size_t>(n) > buffer.size();
  r.size = r.truncated ? buffer.size() : static_cast<size_t>(n);
  r.from = net::ip_text(reinterpret_cast<const sockaddr*>(&from));
  return r;
}

}  // namespace ddp::rdzv::mcast
