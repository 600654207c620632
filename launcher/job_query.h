#pragma once
// What ddp-launch --status asks: a job's current round, its nodes and each one's liveness,
// read-only, from the same flags its launchers were given. Opens the store as an observer
// (launcher/status_store.h), reads the rounds (rdzv::read_job_status), then the liveness the
// backend keeps (launcher/liveness_probe.h: leases on etcd, heartbeat counters elsewhere).
// Liveness is left unknown once the job ended. Errors: those of opening the store and reading it.
#include <optional>
#include <string>

#include "launcher/agent.h"
#include "rendezvous/job_status.h"

namespace ddp::launcher {

struct JobQuery {
  std::optional<rdzv::JobStatus> status;  // nullopt: no job with this run id in the store
  std::string where;                      // the store asked, for messages
};

struct JobQueryOptions {
  Millis connect_timeout{5000};  // reaching the store
  Millis liveness_window{0};     // heartbeat backends: 0 = 1.5 x keep_alive_interval
};

JobQuery query_job(const AgentOptions& options, const JobQueryOptions& query = {});

}  // namespace ddp::launcher
