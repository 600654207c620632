#pragma once
// JobStatus: what a job's store says about it now, read by someone outside the job (ddp-launch
// --status). Read-only: only check and get, never a write (add(key, 0) would create a missing
// counter, and on etcd it is a transaction), so looking at a job can never change it.
//
// What is read (the keys of job_keys.h, as elastic_rendezvous.h and node_rendezvous.h use them):
//   round/<n>/arrived    the rounds: numbered from 0 with no gap; the newest that formed is
//                        the job's current round, a newer one still forming holds the nodes
//                        waiting to join
//   round/<n>/closed     elastic: the round's node count K (its nodes are arrivals 0..K-1);
//                        static: the round formed once node/0..nnodes-1 are all registered
//   round/<n>/node/<i>   each node's registration (host, id, nproc)
//   round/<n>/outcome    the round's outcome text, when it has one
//   closed, left         the job ended (why), a launcher of it left
// Liveness is not the store's business here: each node's stays kUnknown until a prober of the
// launcher (launcher/liveness_probe.h) fills it in.
// Errors: those of the store (unreachable: NetworkError; refused: StoreError); a malformed
// registration is a StoreError naming its key.
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
