// The agent's pure decisions and host facts: where the store lives, the job token, this host's
// addresses, a free port. Kept apart from the loop (agent.cc) so tests can check them directly.
#include <arpa/inet.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netdb.h>
#include <sys/socket.h>

#include <algorithm>
#include <cstdio>
#include <random>

#include "common/auth.h"
#include "common/error.h"
#include "common/socket.h"
#include "launcher/agent.h"

namespace ddp::launcher {
namespace {

constexpr uint16_t kDefaultTcpRdzvPort = 29400;  // torchrun's c10d default

std::string ip_text(const sockaddr* sa) {
  char buf[INET6_ADDRSTRLEN] = {};
  if (sa->sa_family == AF_INET) {
    inet_ntop(AF_INET, &reinterpret_cast<const sockaddr_in*>(sa)->sin_addr, buf, sizeof buf);
  } else if (sa->sa_family == AF_INET6) {
    inet_ntop(AF_INET6, &reinterpret_cast<const sockaddr_in6*>(sa)->sin6_addr, buf, sizeof buf);
  }
  return buf;
}

// Every address of every interface that is up, non-loopback first; IPv6 link-local left out.
std::vector<std::string> interface_addresses() {
  std::vector<std::string> outer, loop;
  ifaddrs* head = nullptr;
  if (getifaddrs(&head) != 0) return {};
  for (ifaddrs* i = head; i != nullptr; i = i->ifa_next) {
    if (i->ifa_addr == nullptr || !(i->ifa_flags & IFF_UP)) continue;
    int family = i->ifa_addr->sa_family;
    if (family != AF_INET && family != AF_INET6) continue;
    std::string ip = ip_text(i->ifa_addr);
    if (ip.empty() || ip.starts_with("fe80")) continue;
    ((i->ifa_flags & IFF_LOOPBACK) ? loop : outer).push_back(ip);
  }
  freeifaddrs(head);
  outer.insert(outer.end(), loop.begin(), loop.end());
  return outer;
}

std::vector<std::string> resolve_all(const std::string& host) {
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

// The source address the kernel would use to reach `host` (a UDP connect sends nothing).
std::string route_source(const std::string& host) {
  for (const auto& ip : resolve_all(host)) {
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

bool single_node(const AgentOptions& o) { return o.launch.standalone || o.launch.nnodes_max == 1; }

}  // namespace

std::vector<std::string> resolve_host(const std::string& host) { return resolve_all(host); }

bool is_local_host(const std::string& host) {
  if (host == "localhost" || host == net::hostname()) return true;
  auto mine = interface_addresses();
  for (const auto& ip : resolve_all(host)) {
    if (std::find(mine.begin(), mine.end(), ip) != mine.end()) return true;
  }
  return false;
}

StorePlan plan_store(const AgentOptions& o) {
  const auto& l = o.launch;
  StorePlan p;
  if (single_node(o)) {  // private store for this node's workers only
    p.kind = StorePlan::Kind::kHost;
    p.bind_host = p.connect_host = "127.0.0.1";
    return p;
  }
  if (l.rdzv_backend == "file") {
    p.kind = StorePlan::Kind::kFile;
    p.file_path = l.rdzv_endpoint + "/" + l.run_id + ".store";
    return p;
  }
  if (l.rdzv_backend == "multicast") {
    net::Endpoint ep = net::parse_endpoint(l.rdzv_endpoint);
    p.kind = StorePlan::Kind::kMulticast;
    p.group = ep.host;
    p.port = ep.port;
    return p;
  }
  if (l.rdzv_backend == "tcp") {
    net::Endpoint ep = net::parse_endpoint(l.rdzv_endpoint, kDefaultTcpRdzvPort);
    p.connect_host = ep.host;
    p.port = ep.port;
    p.bind_host = ep.host;
    if (o.rdzv_is_host) p.kind = *o.rdzv_is_host ? StorePlan::Kind::kHost : StorePlan::Kind::kConnect;
    else p.kind = is_local_host(ep.host) ? StorePlan::Kind::kHostOrConnect : StorePlan::Kind::kConnect;
    if (p.kind == StorePlan::Kind::kHost && !is_local_host(ep.host)) p.bind_host = "";
    return p;
  }
  // static: node 0 hosts on master_port+1 (MASTER_PORT stays free for the workers), or on the
  // --rdzv-endpoint port when one is given.
  net::Endpoint ep{l.master_addr, static_cast<uint16_t>(l.master_port + 1)};
  if (!l.rdzv_endpoint.empty()) ep = net::parse_endpoint(l.rdzv_endpoint, ep.port);
  p.connect_host = ep.host;
  p.port = ep.port;
  bool host = o.rdzv_is_host.value_or(l.node_rank == 0);
  p.kind = host ? StorePlan::Kind::kHost : StorePlan::Kind::kConnect;
  p.bind_host = is_local_host(ep.host) ? ep.host : "";
  return p;
}

// SHA-256 from libcrypto: the same digest whatever library versions a launcher was built with
// (Boost's detail SHA-1 changed its digest type in 1.86, and launchers silently disagreed).
std::string derive_job_token(const std::string& rdzv_id) {
  return auth::hex(auth::sha256("ddp-launch job token v2:" + rdzv_id), 16);
}

std::string random_hex(size_t bytes) {
  std::random_device rd;  // getrandom(2)
  std::string out;
  static const char* kHex = "0123456789abcdef";
  for (size_t i = 0; i < bytes; ++i) {
    unsigned v = rd() & 0xff;
    out += kHex[v >> 4];
    out += kHex[v & 15];
  }
  return out;
}

int free_port() {
  Fd s = net::listen_tcp({.host = "127.0.0.1", .port = 0, .backlog = 1, .reuse_addr = false});
  return net::local_port(s.get());
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

}  // namespace ddp::launcher
