#pragma once
// How ddp-launch --status prints a job (launcher/job_query.h): a table for people, or one JSON
// object for scripts (--format json). The JSON's fields: run_id, backend, store, round (null
// before one formed), world_size, outcome (null while the round runs), nodes [{node_rank, host,
// id, nproc, rank_offset, ranks: [first, last], liveness: "alive"|"lost"|"unknown",
// last_seen_s (null where the backend does not tell), liveness_detail}], forming_round (null
// when none), waiting (nodes as above, node_rank = arrival), ended (null, or why), left.
#include <string>

#include "rendezvous/job_status.h"

namespace ddp::cli {

struct StatusSource {
  std::string backend;  // "tcp", "etcd", ...
  std::string where;    // the store asked
};

std::string format_status_text(const rdzv::JobStatus& job, const StatusSource& source);
std::string format_status_json(const rdzv::JobStatus& job, const StatusSource& source);

}  // namespace ddp::cli
