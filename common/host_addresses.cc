#include "common/host_addresses.h"

#include <arpa/inet.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netdb.h>

#include <algorithm>

#include "common/fd.h"
#include "common/socket.h"

namespace ddp::net {
namespace {

// The source address the kernel would use to reach `host` (a UDP connect sends nothing).
std::string route_source(const std::string& host) {
  for (const auto& ip : resolve_addresses(host)) {
    bool v6 = ip.find(':') != std::string::npos;
    Fd s(::socket(v6 ? AF_INET6 : AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0));
    if (!s) continue;
    sockaddr_storage ss{};
    socklen_t len = 0;
    if (v6) {
      auto* a = reinterpret_cast<sockaddr_in6*>(&ss);
      a->sin6_family = AF_INET6;
      a->sin6_port = htons(9);
      inet_pton(AF_INET6, ip.c_str(), &a->sin6_addr);
      len = sizeof *a;
    } else {
      auto* a = reinterpret_cast<sockaddr_in*>(&ss);
      a->sin_family = AF_INET;
      a->sin_port = htons(9);
      inet_pton(AF_INET, ip.c_str(), &a->sin_addr);
      len = sizeof *a;
    }
    if (::connect(s.get(), reinterpret_cast<sockaddr*>(&ss), len) != 0) continue;
    sockaddr_storage local{};
    socklen_t llen = sizeof local;
    if (::getsockname(s.get(), reinterpret_cast<sockaddr*>(&local), &llen) == 0) {
      std::string src = ip_text(reinterpret_cast<sockaddr*>(&local));
      if (src != "0.0.0.0" && src != "::") return src;  // no source: e.g. a multicast route via lo
    }
  }
  return "";
}

}  // namespace

std::vector<std::string> resolve_addresses(const std::string& host) {
  std::vector<std::string> out;
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* res = nullptr;
  if (getaddrinfo(host.c_str(), nullptr, &hints, &res) != 0) return out;
  for (addrinfo* a = res; a != nullptr; a = a->ai_next) out.push_back(ip_text(a->ai_addr));
  freeaddrinfo(res);
  return out;
}

std::string ip_text(int family, const void* address) {
  char buf[INET6_ADDRSTRLEN] = {};
  if (family != AF_INET && family != AF_INET6) return {};
  if (inet_ntop(family, address, buf, sizeof buf) == nullptr) return {};
  return buf;
}

std::string ip_text(const sockaddr* sa) {
  if (sa->sa_family == AF_INET) {
    return ip_text(AF_INET, &reinterpret_cast<const sockaddr_in*>(sa)->sin_addr);
  }
  if (sa->sa_family == AF_INET6) {
    return ip_text(AF_INET6, &reinterpret_cast<const sockaddr_in6*>(sa)->sin6_addr);
  }
  return {};
}

std::string endpoint_text(const sockaddr* sa) {
  if (sa->sa_family == AF_INET) {
    return Endpoint{ip_text(sa), ntohs(reinterpret_cast<const sockaddr_in*>(sa)->sin_port)}.str();
  }
  if (sa->sa_family == AF_INET6) {
    return Endpoint{ip_text(sa), ntohs(reinterpret_cast<const sockaddr_in6*>(sa)->sin6_port)}.str();
  }
  return "?";
}

namespace {
bool link_local(const sockaddr* sa) {
  if (sa->sa_family != AF_INET6) return false;
  return IN6_IS_ADDR_LINKLOCAL(&reinterpret_cast<const sockaddr_in6*>(sa)->sin6_addr);
}
}  // namespace

std::vector<std::string> interface_addresses() {
  std::vector<std::string> outer, loop;
  ifaddrs* head = nullptr;
  if (getifaddrs(&head) != 0) return {};
  for (ifaddrs* i = head; i != nullptr; i = i->ifa_next) {
    if (i->ifa_addr == nullptr || !(i->ifa_flags & IFF_UP)) continue;
    int family = i->ifa_addr->sa_family;
    if (family != AF_INET && family != AF_INET6) continue;
    if (link_local(i->ifa_addr)) continue;
    std::string ip = ip_text(i->ifa_addr);
    if (ip.empty()) continue;
    ((i->ifa_flags & IFF_LOOPBACK) ? loop : outer).push_back(ip);
  }
  freeifaddrs(head);
  outer.insert(outer.end(), loop.begin(), loop.end());
  return outer;
}

std::vector<std::string> local_addresses(const std::string& peer_host) {
  std::vector<std::string> out;
  if (!peer_host.empty()) {
    if (auto src = route_source(peer_host); !src.empty()) out.push_back(src);
  }
  for (const auto& ip : interface_addresses()) {
    if (std::find(out.begin(), out.end(), ip) == out.end()) out.push_back(ip);
  }
  if (out.empty()) out.push_back("127.0.0.1");
  return out;
}

}  // namespace ddp::net
