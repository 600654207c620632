#include "comm/init_store.h"

#include <charconv>

#include "common/error.h"
#include "common/settings.h"
#include "common/socket.h"
#include "rendezvous/etcd_store.h"
#include "rendezvous/file_store.h"
#include "rendezvous/hash_store.h"
#include "rendezvous/init_method.h"
#include "rendezvous/multicast_rendezvous.h"
#include "rendezvous/store_url.h"
#include "rendezvous/tcp_store.h"

namespace ddp::comm {
namespace {

int first_int(std::initializer_list<const char*> names) {
  for (const char* name : names) {
    auto v = settings::get(name);
    if (!v) continue;
    int out = 0;
    auto [end, ec] = std::from_chars(v->data(), v->data() + v->size(), out);
    if (ec != std::errc() || end != v->data() + v->size())
      DDP_THROW(InvalidArgument, "environment variable ", name, "='", *v, "': an integer");
    return out;
  }
  return -1;
}

void fill_ranks_from_env(StoreHandle& h) {
  const EnvRanks e = env_ranks();
  if (h.rank < 0) h.rank = e.rank;
  if (h.world_size < 0) h.world_size = e.world_size;
  if (h.rank < 0) {
    DDP_THROW(InvalidArgument,
              "init_process_group: no rank given and none of RANK, OMPI_COMM_WORLD_RANK, "
              "SLURM_PROCID is set");
  }
  if (h.world_size < 1) {
    DDP_THROW(InvalidArgument,
              "init_process_group: no world size given and none of WORLD_SIZE, "
              "OMPI_COMM_WORLD_SIZE, SLURM_NTASKS is set");
  }
  if (h.rank >= h.world_size) {
    DDP_THROW(InvalidArgument, "init_process_group: rank ", h.rank, " is outside [0, ", h.world_size, ")");
  }
}

std::shared_ptr<rdzv::Store> tcp_store(const net::Endpoint& at, bool host, const StoreRequest& req) {
  rdzv::TCPStoreOptions o;
  o.host = at.host;
  o.port = at.port;
  o.is_server = host;
  o.connect_timeout = req.connect_timeout;
  if (!req.job_token.empty()) o.job_token = req.job_token;
  return std::make_shared<rdzv::TCPStore>(o);
}

// DDP_STORE: the launcher's TCPStore, or etcd itself (--rdzv-backend etcd: no node serves the
// store; the job token plays no part there, etcd's own authentication does).
std::shared_ptr<rdzv::Store> store_at(const rdzv::StoreUrl& url, const StoreRequest& req) {
  if (url.kind == rdzv::StoreUrl::Kind::kTcp) return tcp_store(url.tcp, false, req);
  rdzv::EtcdStoreOptions o;
  o.client = rdzv::etcd_client_options(url);
  o.prefix = url.prefix;
  return std::make_shared<rdzv::EtcdStore>(std::move(o));
}

StoreHandle open_env(const StoreRequest& req) {
  StoreHandle h;
  h.rank = req.rank;
  h.world_size = req.world_size;
  fill_ranks_from_env(h);
  if (auto ep = settings::get(settings::kStore)) {
    h.store = store_at(rdzv::parse_store_url(*ep), req);
    h.description = std::string(settings::kStore.name) + "=" + *ep;
    return h;
  }
  auto addr = settings::get(settings::kMasterAddr);
  auto port = settings::get_int(settings::kMasterPort);
  if (addr && port) {
    if (*port <= 0 || *port > 65535) DDP_THROW(InvalidArgument, "MASTER_PORT=", *port, " is not a port");
    net::Endpoint at{*addr, static_cast<uint16_t>(*port)};
    h.hosts_server = h.rank == 0;
    h.store = tcp_store(at, h.hosts_server, req);
    h.description = "MASTER_ADDR:MASTER_PORT=" + at.str() + (h.hosts_server ? " (hosted here)" : "");
    return h;
  }
  // Nobody else to meet: a world of one, or MPI whose own launcher did the rendezvous.
  if (h.world_size == 1 || req.backend == "mpi") {
    h.store = std::make_shared<rdzv::HashStore>();
    h.description = "a local store (" + std::string(h.world_size == 1 ? "world of one" : "mpi") + ")";
    return h;
  }
  DDP_THROW(InvalidArgument, "init_process_group(env://): set ", settings::kStore.name,
            ", or MASTER_ADDR and MASTER_PORT, "
            "to say where the ",
            h.world_size, " ranks meet");
}

// Ranks may be left to the discovery; the world size must be known.
StoreHandle open_multicast(const rdzv::InitMethod& m, StoreHandle h, const StoreRequest& req) {
  const EnvRanks e = env_ranks();
  if (h.rank < 0) h.rank = e.rank;
  if (h.world_size < 0) h.world_size = e.world_size;
  if (h.world_size < 1) {
    DDP_THROW(InvalidArgument, "init_process_group(", m.url,
              "): a multicast rendezvous needs the world size: "
              "?world_size=N, the world_size option or WORLD_SIZE");
  }
  if (h.rank >= h.world_size) {
    DDP_THROW(InvalidArgument, "init_process_group: rank ", h.rank, " is outside [0, ", h.world_size, ")");
  }
  rdzv::MulticastRendezvousOptions o;
  o.method = m;
  o.rank = h.rank;
  o.world_size = h.world_size;
  o.job_token = req.job_token;
  rdzv::MulticastRendezvous r = rdzv::multicast_rendezvous(o);
  h.store = r.store;
  h.rank = r.rank;
  h.hosts_server = r.hosts_server;
  h.description = r.description;
  return h;
}

}  // namespace

EnvRanks env_ranks() {
  EnvRanks r;
  r.rank = first_int({"RANK", "OMPI_COMM_WORLD_RANK", "PMI_RANK", "SLURM_PROCID"});
  r.world_size = first_int({"WORLD_SIZE", "OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "SLURM_NTASKS"});
  r.local_rank = first_int({"LOCAL_RANK", "OMPI_COMM_WORLD_LOCAL_RANK", "SLURM_LOCALID"});
  r.local_world_size = first_int({"LOCAL_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_SIZE", "SLURM_NTASKS_PER_NODE"});
  return r;
}

StoreHandle open_init_store(const StoreRequest& req) {
  if (req.given) {
    if (req.rank < 0 || req.world_size < 1) {
      DDP_THROW(InvalidArgument,
                "init_process_group: with a store given, rank and world_size must be given too");
    }
    StoreHandle h{req.given, req.rank, req.world_size, false, "the given store"};
    if (h.rank >= h.world_size) {
      DDP_THROW(InvalidArgument, "init_process_group: rank ", h.rank, " is outside [0, ", h.world_size, ")");
    }
    return h;
  }
  if (req.init_method.empty() || req.init_method == "env://") return open_env(req);
  const rdzv::InitMethod m = rdzv::parse_init_method(req.init_method);
  if (m.scheme == rdzv::InitScheme::kEnv) return open_env(req);
  StoreHandle h;
  h.rank = req.rank >= 0 ? req.rank : m.rank.value_or(-1);
  h.world_size = req.world_size >= 0 ? req.world_size : m.world_size.value_or(-1);
  if (m.multicast) return open_multicast(m, h, req);
  fill_ranks_from_env(h);
  if (m.scheme == rdzv::InitScheme::kTcp) {
    net::Endpoint at{m.host, m.port};
    h.hosts_server = h.rank == 0;
    h.store = tcp_store(at, h.hosts_server, req);
    h.description = req.init_method + (h.hosts_server ? " (hosted here)" : "");
  } else {
    h.store = std::make_shared<rdzv::FileStore>(m.path);
    h.description = req.init_method;
  }
  return h;
}

}  // namespace ddp::comm
