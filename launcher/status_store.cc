#include "launcher/status_store.h"

#include <filesystem>

#include "common/error.h"
#include "common/settings.h"
#include "common/socket.h"
#include "launcher/etcd_job.h"
#include "rendezvous/etcd_store.h"
#include "rendezvous/file_store.h"
#include "rendezvous/tcp_store.h"

namespace ddp::launcher {
namespace {

// The token the launchers of a multi-node tcp/static job hold (Agent's resolve_token).
std::string job_token(const AgentOptions& o) {
  if (!o.job_token.empty()) return o.job_token;
  if (auto t = settings::get(settings::kJobToken)) return *t;
  return derive_job_token(o.launch.run_id);
}

StatusStore open_tcp(const AgentOptions& o, const StorePlan& plan, Millis connect_timeout) {
  const std::string endpoint = net::Endpoint{plan.connect_host, plan.port}.str();
  rdzv::TCPStoreOptions t;
  t.host = plan.connect_host;
  t.port = plan.port;
  t.job_token = job_token(o);
  t.connect_timeout = connect_timeout;
  t.timeout = o.launch.read_timeout;
  try {
    return {std::make_unique<rdzv::TCPStore>(t), "the rendezvous store at " + endpoint};
  } catch (const StoreError& e) {  // answered, but not as this job's store
    DDP_THROW(StoreError, "no job with --rdzv-id ", o.launch.run_id, " at ", endpoint,
              ": the store there refused the job token (derived from --rdzv-id unless ",
              settings::kJobToken.name, " is set: give the job's): ", e.message());
  }
}

StatusStore open_file(const AgentOptions& o, const StorePlan& plan) {
  if (!std::filesystem::exists(plan.file_path)) {
    DDP_THROW(StoreError, "no job with --rdzv-id ", o.launch.run_id, " at ", o.launch.rdzv_endpoint, " (",
              plan.file_path, " does not exist)");
  }
  return {std::make_unique<rdzv::FileStore>(plan.file_path, o.launch.read_timeout),
          "the file store " + plan.file_path};
}

StatusStore open_etcd(const AgentOptions& o) {
  auto s = std::make_unique<rdzv::EtcdStore>(rdzv::EtcdStoreOptions{.client = etcd_client_options(o.launch),
                                                                    .prefix = o.launch.etcd.prefix,
                                                                    .timeout = o.launch.read_timeout});
  std::string where = s->client().describe() + " under " + o.launch.etcd.prefix;
  rdzv::EtcdStore* etcd = s.get();
  return {std::move(s), std::move(where), etcd};
}

}  // namespace

StatusStore open_rendezvous_store_readonly(const AgentOptions& options, Millis connect_timeout) {
  const LaunchOptions& l = options.launch;
  if (l.standalone || l.nnodes_max == 1) {
    DDP_THROW(InvalidArgument,
              "a single-node job (--standalone, or --nnodes 1) keeps its store private to its launcher: "
              "--status needs the rendezvous flags of a multi-node job (--nnodes, --rdzv-backend, "
              "--rdzv-endpoint, --rdzv-id)");
  }
  const StorePlan plan = plan_store(options);
  switch (plan.kind) {
    case StorePlan::Kind::kFile: return open_file(options, plan);
    case StorePlan::Kind::kEtcd: return open_etcd(options);
    case StorePlan::Kind::kMulticast:
      DDP_THROW(
          InvalidArgument,
          "--status cannot find a multicast job's store (it is announced on the group to the "
          "launchers only): give --rdzv-backend tcp --rdzv-endpoint <node 0's address>:<its store port>");
    default: return open_tcp(options, plan, connect_timeout);
  }
}

}  // namespace ddp::launcher
