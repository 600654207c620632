#include "launcher/etcd_job.h"

#include <algorithm>
#include <thread>

#include "common/error.h"
#include "common/log.h"
#include "common/socket.h"
#include "launcher/agent.h"
#include "launcher/lease_liveness.h"
#include "rendezvous/job_records.h"
#include "rendezvous/store_url.h"

namespace ddp::launcher {
namespace {

constexpr Millis kRetrySlice{500};  // between tries while etcd does not answer yet

std::string host_of(const std::string& endpoint) {
  std::string e = endpoint;
  if (const auto scheme = e.find("://"); scheme != std::string::npos) e = e.substr(scheme + 3);
  try {
    return net::parse_endpoint(e, kDefaultEtcdPort).host;
  } catch (const InvalidArgument&) {
    return e;
  }
}

}  // namespace

std::vector<std::string> members_near_first(const std::vector<std::string>& endpoints) {
  std::vector<std::string> near, far;
  for (const auto& e : endpoints) (is_local_host(host_of(e)) ? near : far).push_back(e);
  if (!far.empty()) {
    const size_t start = std::hash<std::string>{}(net::hostname()) % far.size();
    std::rotate(far.begin(), far.begin() + static_cast<std::ptrdiff_t>(start), far.end());
  }
  near.insert(near.end(), far.begin(), far.end());
  return near;
}

rdzv::EtcdClientOptions etcd_client_options(const LaunchOptions& l) {
  rdzv::EtcdClientOptions o;
  o.endpoints = members_near_first(l.etcd.endpoints);
  o.protocol = l.etcd.protocol;
  o.cacert = l.etcd.cacert;
  o.cert = l.etcd.cert;
  o.key = l.etcd.key;
  o.request_timeout = std::clamp(l.heartbeat_bound(), Millis(2'000), std::max(Millis(2'000), l.read_timeout));
  o.attempt_timeout = std::min(o.attempt_timeout, o.request_timeout);
  return o;
}

std::unique_ptr<rdzv::EtcdStore> open_etcd_store(const LaunchOptions& l,
                                                 const std::function<void()>& check_interrupt) {
  auto store = std::make_unique<rdzv::EtcdStore>(rdzv::EtcdStoreOptions{
      .client = etcd_client_options(l), .prefix = l.etcd.prefix, .timeout = l.read_timeout});
  // Until its first join: etcd's slow answers (every launcher of a large job starting at once)
  // are waited for up to the rendezvous timeout, as while joining (agent.cc, Joining).
  store->set_patience(l.rdzv_timeout);
  const Deadline deadline(l.rdzv_timeout);
  for (bool told = false;; told = true) {
    if (check_interrupt) check_interrupt();
    try {
      if (rdzv::JobRecords(*store, l.run_id).any_left()) {
        DDP_THROW(InvalidArgument, "--rdzv-id '", l.run_id, "' belongs to a finished job in ",
                  store->client().describe(), " (its keys are under ", l.etcd.prefix, l.run_id,
                  "/): use a new --rdzv-id per job (e.g. the "
                  "scheduler's job id), or delete them: etcdctl del --prefix '",
                  l.etcd.prefix, l.run_id, "/'");
      }
      return store;
    } catch (const NetworkError& e) {
      if (deadline.expired()) {
        DDP_THROW(TimeoutError, store->client().describe(), " did not answer within ", l.rdzv_timeout.count(),
                  " ms (join_timeout; are the members running?): ", e.message());
      }
      if (!told) logger("agent")->info("waiting for {}: {}", store->client().describe(), e.message());
    }
    std::this_thread::sleep_for(std::min(kRetrySlice, std::max(Millis(1), deadline.remaining())));
  }
}

std::string etcd_worker_store(const LaunchOptions& l) {
  return rdzv::etcd_store_url(members_near_first(l.etcd.endpoints), l.etcd.protocol, l.etcd.prefix);
}

std::unique_ptr<Liveness> start_lease_liveness(const LaunchOptions& l, const std::string& id,
                                               std::function<void()> on_loss) {
  LeaseLivenessOptions o;
  o.client = etcd_client_options(l);
  o.prefix = l.etcd.prefix;
  o.run_id = l.run_id;
  o.id = id;
  o.interval = l.keep_alive_interval;
  o.max_attempt = l.keep_alive_max_attempt;
  o.join_patience = l.rdzv_timeout;
  o.on_loss = std::move(on_loss);
  return std::make_unique<LeaseLiveness>(std::move(o));
}

}  // namespace ddp::launcher
