#pragma once
// JobStatus: what a job's store says about it now, for someone outside the job (ddp-launch
// --status). Read-only (check and get, never add(key, 0), which creates a key), so looking at a
// job never changes it. It reads job_keys.h's keys: round/<n>/arrived (rounds, from 0 with no
// gap: the newest formed is current, a newer one forming holds the nodes waiting), closed
// (elastic: the node count; static: formed once every node/<i> is there), node/<i> (host, id,
// nproc), outcome; and the job's closed and left. Each node's liveness stays kUnknown until a
// prober (launcher/liveness_probe.h) fills it in.
// Errors: the store's (unreachable: NetworkError; refused: StoreError); a malformed registration
// is a StoreError naming its key.
#include <optional>
#include <string>
#include <vector>

#include "common/timeouts.h"
#include "rendezvous/store.h"

namespace ddp::rdzv {

enum class NodeLiveness { kUnknown, kAlive, kLost };
const char* to_string(NodeLiveness liveness);  // "unknown", "alive", "lost"

struct NodeStatus {
  int node_rank = -1;  // in the round; waiting nodes: their arrival index in the forming round
  std::string host;
  std::string id;  // the launcher's liveness id ("": none)
  int nproc = 1;
  int rank_offset = 0;  // global rank of its local rank 0 (waiting nodes: 0)
  NodeLiveness liveness = NodeLiveness::kUnknown;
  std::optional<Millis> last_seen;  // how long ago it was last seen alive, where known
  std::string liveness_detail;      // what the liveness rests on ("lease renewed", "silent for ...")
};

struct JobStatus {
  std::string run_id;
  int round = -1;                      // the newest round that formed; -1: none yet
  std::vector<NodeStatus> nodes;       // its nodes, by node rank
  int world_size = 0;                  // the sum of their nproc
  std::optional<std::string> outcome;  // its outcome ("done", "failed: ...", "changed: ..."), if any
  int forming_round = -1;              // a newer round that nodes have joined but that has not formed
  std::vector<NodeStatus> waiting;     // the nodes in it: waiting to join
  std::optional<std::string> ended;    // "<run_id>/closed": the job is over, and why
  bool left = false;                   // a launcher of the job has left ("<run_id>/left")
};

struct JobStatusOptions {
  std::string run_id = "none";
  bool elastic = false;  // --nnodes MIN:MAX with MIN < MAX: rounds close by "closed"
  int nnodes = 1;        // static: the node count of every round (--nnodes)
};

// The job as its store has it; nullopt when the store holds no job with that run id.
std::optional<JobStatus> read_job_status(Store& store, const JobStatusOptions& options);

}  // namespace ddp::rdzv
