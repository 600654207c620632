// The agent's pure decisions and host facts: where the store lives, the job token, this host's
// addresses, a free port. Kept apart from the loop (agent.cc) so tests can check them directly.

#include <algorithm>
#include <cstdio>

#include "common/auth.h"
#include "common/error.h"
#include "common/free_port.h"
#include "common/host_addresses.h"
#include "common/socket.h"
#include "launcher/agent.h"

namespace ddp::launcher {
namespace {

std::vector<std::string> resolve_all(const std::string& host) { return net::resolve_addresses(host); }

bool single_node(const AgentOptions& o) { return o.launch.standalone || o.launch.nnodes_max == 1; }

}  // namespace

std::vector<std::string> resolve_host(const std::string& host) { return resolve_all(host); }

bool is_local_host(const std::string& host) {
  if (host == "localhost" || host == net::hostname()) return true;
  auto mine = net::interface_addresses();
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
  if (l.rdzv_backend == RdzvBackend::kFile) {
    p.kind = StorePlan::Kind::kFile;
    p.file_path = l.rdzv_endpoint + "/" + l.run_id + ".store";
    return p;
  }
  if (l.rdzv_backend == RdzvBackend::kEtcd) {  // etcd is the store: nothing to host or find
    p.kind = StorePlan::Kind::kEtcd;
    return p;
  }
  if (l.rdzv_backend == RdzvBackend::kMulticast) {
    net::Endpoint ep = net::parse_endpoint(l.rdzv_endpoint);
    p.kind = StorePlan::Kind::kMulticast;
    p.group = ep.host;
    p.port = ep.port;
    return p;
  }
  if (l.rdzv_backend == RdzvBackend::kTcp) {
    net::Endpoint ep = net::parse_endpoint(l.rdzv_endpoint, kDefaultTcpRdzvPort);
    p.connect_host = ep.host;
    p.port = ep.port;
    p.bind_host = ep.host;
    if (o.rdzv_is_host)
      p.kind = *o.rdzv_is_host ? StorePlan::Kind::kHost : StorePlan::Kind::kConnect;
    else
      p.kind = is_local_host(ep.host) ? StorePlan::Kind::kHostOrConnect : StorePlan::Kind::kConnect;
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

// SHA-256 (common/auth): the same digest whatever library versions a launcher was built with
// (Boost's detail SHA-1 changed its digest type in 1.86, and launchers silently disagreed).
std::string derive_job_token(const std::string& rdzv_id) {
  return auth::hex(auth::sha256("ddp-launch job token v2:" + rdzv_id), 16);
}

std::string random_hex(size_t bytes) {
  std::string raw(bytes, '\0');
  auth::random_bytes(reinterpret_cast<uint8_t*>(raw.data()), raw.size());
  std::string out;
  static const char* kHex = "0123456789abcdef";
  for (size_t i = 0; i < bytes; ++i) {
    unsigned v = static_cast<unsigned char>(raw[i]);
    out += kHex[v >> 4];
    out += kHex[v & 15];
  }
  return out;
}

int free_port() { return net::pick_free_port(); }

std::vector<std::string> local_addresses(const std::string& peer_host) {
  return net::local_addresses(peer_host);
}

}  // namespace ddp::launcher
