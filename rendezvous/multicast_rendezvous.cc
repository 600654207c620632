#include "rendezvous/multicast_rendezvous.h"

#include "common/auth.h"
#include "common/deadline.h"
#include "common/error.h"
#include "common/host_addresses.h"
#include "common/log.h"
#include "common/settings.h"
#include "common/socket.h"
#include "rendezvous/multicast_discovery.h"
#include "rendezvous/tcp_store.h"

namespace ddp::rdzv {
namespace {

TCPStoreOptions store_options(const std::string& host, uint16_t port, bool server, const std::string& token,
                              Millis connect) {
  TCPStoreOptions o;
  o.host = host;
  o.port = port;
  o.is_server = server;
  o.job_token = token;
  o.connect_timeout = connect;
  return o;
}

// The first of `hosts` whose store answers, each tried in turn until the deadline.
std::shared_ptr<TCPStore> connect_any(const mcast::Participant& rank0, const std::string& token,
                                      const Deadline& deadline, std::string* endpoint) {
  const auto hosts = rank0.reachable_at();
  std::string last;
  while (true) {
    for (const auto& h : hosts) {
      try {
        const Millis slice = std::max(Millis(1), std::min(Millis(1000), deadline.remaining()));
        auto s = std::make_shared<TCPStore>(store_options(h, rank0.store_port, false, token, slice));
        *endpoint = net::Endpoint{h, rank0.store_port}.str();
        return s;
      } catch (const Error& e) {
        last = e.message();
      }
      if (deadline.expired()) {
        DDP_THROW(TimeoutError, "multicast rendezvous: rank 0's store (", rank0.describe(), ", port ",
                  rank0.store_port, ") did not answer at any of its addresses; last error: ", last);
      }
    }
  }
}

}  // namespace

std::string derive_group_token(const std::string& group_name) {
  return auth::hex(auth::sha256("ddp multicast group token v1:" + group_name), 16);
}

MulticastRendezvous multicast_rendezvous(const MulticastRendezvousOptions& o) {
  const InitMethod& m = o.method;
  DDP_CHECK(m.multicast, "multicast_rendezvous needs a multicast init method, got ", m.url);
  MulticastRendezvous out;
  out.job_token = o.job_token;
  if (out.job_token.empty()) {
    out.job_token = derive_group_token(m.group_name);
    logger("rendezvous")
        ->warn(
            "{}: no job token ({}): the token is derived from group_name '{}', which "
            "anyone who knows the name can derive too",
            m.url, settings::kJobToken.name, m.group_name);
  }
  const Millis timeout = m.timeout_s ? Millis(int64_t{*m.timeout_s} * 1000) : o.timeout;
  const Deadline deadline(timeout);
  auto own = std::make_shared<TCPStore>(store_options("", 0, true, out.job_token, kDefaultConnectTimeout));

  mcast::DiscoveryOptions d;
  d.socket.group = m.host;
  d.socket.port = m.port;
  d.socket.ttl = m.ttl;
  d.socket.interface = m.interface;
  d.job_id = m.group_name;
  d.token = out.job_token;
  d.world = o.world_size;
  d.requested_rank = o.rank;
  d.host = net::hostname();
  d.addresses = net::local_addresses(m.host);
  d.store_port = own->port();
  d.timeout = timeout;
  mcast::MulticastDiscovery discovery(d);
  const mcast::DiscoveryResult r = discovery.wait();
  out.rank = r.rank;
  std::string endpoint;
  if (r.rank == 0) {
    out.store = own;
    out.hosts_server = true;
    endpoint = net::Endpoint{d.addresses.front(), own->port()}.str();
  } else {
    own.reset();
    out.store = connect_any(r.by_rank[0], out.job_token, deadline, &endpoint);
  }
  // Everyone keeps announcing until everyone has reached the store.
  const std::string key = "multicast/" + m.group_name + "/joined";
  if (out.store->add(key, 1) == o.world_size) out.store->set(key + "/all", "1");
  out.store->wait({key + "/all"}, std::max(Millis(1), deadline.remaining()));
  out.description = m.url + ": rank 0's store at " + endpoint + (out.hosts_server ? " (hosted here)" : "");
  return out;
}

}  // namespace ddp::rdzv
