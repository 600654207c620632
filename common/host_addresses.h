#pragma once
// This host's IP addresses, as other hosts would reach it. Reads the interface table and the
// routing decision only: nothing is sent. Thread-safe.
#include <sys/socket.h>

#include <string>
#include <vector>

namespace ddp::net {

// "10.0.0.1" / "fd00::1" for an AF_INET/AF_INET6 sockaddr, "" otherwise. The one place
// addresses become text (inet_ntop).
std::string ip_text(const sockaddr* sa);
// The same for a raw address: an in_addr (AF_INET, 4 bytes) or in6_addr (AF_INET6, 16 bytes).
std::string ip_text(int family, const void* address);
// "10.0.0.1:29500" / "[fd00::1]:29500" for an AF_INET/AF_INET6 sockaddr, "?" otherwise.
std::string endpoint_text(const sockaddr* sa);

// The IP addresses `host` resolves to (empty when it does not resolve).
std::vector<std::string> resolve_addresses(const std::string& host);

// Every address of every interface that is up, non-loopback first; IPv6 link-local (fe80::/10,
// unusable without a scope id) left out. Empty when the table cannot be read.
std::vector<std::string> interface_addresses();

// This host's addresses as others would reach it via `peer_host` (a name, an address or a
// multicast group): the source address of the route to it first, then every other interface
// address, loopback last; never empty ("127.0.0.1" at worst).
std::vector<std::string> local_addresses(const std::string& peer_host);

}  // namespace ddp::net
