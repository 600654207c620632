#include "launcher/job_query.h"

#include "launcher/liveness_probe.h"
#include "launcher/status_store.h"

namespace ddp::launcher {

JobQuery query_job(const AgentOptions& options, const JobQueryOptions& query) {
  const LaunchOptions& l = options.launch;
  StatusStore s = open_rendezvous_store_readonly(options, query.connect_timeout);
  JobQuery out;
  out.where = s.where;
  out.status = rdzv::read_job_status(
      *s.store, rdzv::JobStatusOptions{.run_id = l.run_id, .elastic = l.elastic(), .nnodes = l.nnodes_max});
  if (!out.status || out.status->ended || out.status->left) return out;
  const LivenessProbeOptions p{
      .run_id = l.run_id, .interval = l.keep_alive_interval, .window = query.liveness_window};
  if (s.etcd != nullptr)
    probe_leases(*s.etcd, p, *out.status);
  else
    probe_heartbeats(*s.store, p, *out.status);
  return out;
}

}  // namespace ddp::launcher
