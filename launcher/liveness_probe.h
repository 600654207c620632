#pragma once
// Each node's liveness as an observer can tell it (ddp-launch --status), read-only, from what
// the launchers' own liveness keeps in the store (launcher/liveness.h):
//   - StoreHeartbeat (tcp, static, file; launcher/heartbeat.h): a node the round's checker lists
//     as lost in the round's report is lost; otherwise its counter is read repeatedly for up to
//     `window` (one heartbeat interval and a half by default): a counter that moves is alive,
//     last seen when it moved; one that stands still for the whole window is unknown (silent
//     that long, not yet past the bound).
//   - LeaseLiveness (etcd; launcher/lease_liveness.h): a node whose key under "<run_id>/alive/"
//     exists holds a live lease and is alive, last seen when its lease was last renewed (the
//     lease's granted TTL minus its time left, to etcd's second); a node without one is lost.
// Nodes without an id stay unknown. Errors: those of the store (the status read just succeeded,
// so rare).
#include "launcher/launch_options.h"
#include "rendezvous/etcd_store.h"
#include "rendezvous/job_status.h"
#include "rendezvous/store.h"

namespace ddp::launcher {

struct LivenessProbeOptions {
  std::string run_id = "none";
  Millis interval = kDefaultKeepAliveInterval;  // the job's keep_alive_interval
  Millis window{0};                             // 0: 1.5 x interval
};

// Fills liveness, last_seen and liveness_detail of the round's and the waiting nodes.
void probe_heartbeats(rdzv::Store& store, const LivenessProbeOptions& options, rdzv::JobStatus& job);

// etcd: the job's leases (its launchers' keys under JobKeys::alive_prefix()).
void probe_leases(rdzv::EtcdStore& store, const LivenessProbeOptions& options, rdzv::JobStatus& job);

}  // namespace ddp::launcher
