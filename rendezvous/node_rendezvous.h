#pragma once
// Node-level rendezvous: the launchers of a job meet in a Store; each registers itself and
// receives its node rank and the world layout. Each restart is a new round under its own prefix
// ("<run_id>/round/<n>/"), so a failed round's keys never leak into the next. Global ranks are
// contiguous per node, in node-rank order; nodes may differ in nproc.
// Keys: "shape" (nnodes and rank mode, set by the first node), "arrived" (tickets), "node/<rank>"
// (registrations), "layout" (every node's place, MASTER_ADDR and the MASTER_PORT node 0 offered,
// or why the round broke). The last node to arrive reads the N registrations and writes the
// layout; every node gets that key: O(1) requests per node, O(N) at the last. A node that never
// arrives is a TimeoutError within the timeout on every caller, saying how many of how many arrived.
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "common/timeouts.h"
#include "rendezvous/store.h"

namespace ddp::rdzv {

struct NodeInfo {
  std::string host;                    // hostname
  std::vector<std::string> addresses;  // addresses other nodes can reach this one at
  int nproc = 1;                       // workers this node runs
  int requested_rank = -1;             // --node-rank; -1: assigned by arrival order
  std::string id;                      // this launcher's heartbeat key (launcher/heartbeat.h)
  int restarts = -1;                   // the job's restart count as this node knows it; -1: new
  int master_port = 0;                 // MASTER_PORT it offers should it be node 0; 0: none
};

// Who has arrived and who is awaited, reported while a node waits (see on_progress).
struct NodeRendezvousProgress {
  std::string run_id;
  int round = 0;
  int nnodes = 1;
  int count = 0;  // nodes arrived
  // Named up to 64 nodes (node rank, host); above, empty: N waiting nodes would each read N.
  std::vector<std::pair<int, std::string>> arrived;
  std::vector<int> missing;  // node ranks not registered yet (above 64 nodes, by arrival only)
  Millis waited{0};
  Millis timeout{0};
};

struct NodeRendezvousOptions {
  int nnodes = 1;
  std::string run_id = "none";
  int round = 0;  // restart count
  Millis timeout = kDefaultRendezvousTimeout;
  // Called about every kNodeRendezvousSlice while waiting for other nodes; it may throw to abort
  // the wait (the launcher checks for Ctrl-C here). The wait also ends, with InvalidArgument, when
  // another node found the round broken (a node rank claimed twice).
  std::function<void()> check_interrupt;
  // Called every progress_interval while other nodes are awaited (not at all when every node
  // arrives sooner), from the waiting thread; each report reads the round's registrations (up to
  // 64 nodes) or its count of arrivals.
  std::function<void(const NodeRendezvousProgress&)> on_progress;
  Millis progress_interval{5000};
};

inline constexpr Millis kNodeRendezvousSlice{200};

struct NodeAssignment {
  int node_rank = 0;
  int nnodes = 1;
  int world_size = 1;              // sum of every node's nproc
  int rank_offset = 0;             // global rank of this node's local rank 0
  int local_world_size = 1;        // this node's nproc
  std::vector<int> nproc_by_node;  // indexed by node rank
  std::string master_addr;         // reachable address of node 0 (MASTER_ADDR)
  int master_port = 29500;         // MASTER_PORT: free for the workers' own use
  int offered_port = 0;            // node 0's NodeInfo::master_port; 0: it offered none
  std::string store_endpoint;      // "host:port" of the launcher-hosted store (DDP_STORE)
  std::string job_token;           // DDP_JOB_TOKEN
  std::string run_id;              // DDP_RUN_ID / TORCHELASTIC_RUN_ID
  int round = 0;
  std::vector<std::string> host_by_node;  // indexed by node rank
  std::vector<std::string> id_by_node;    // heartbeat ids, indexed by node rank ("" : none)
  int restart_count = 0;                  // failures so far: the most any node of the round knew
};

// Runs one round. The store must be reachable by every node (a TCPStore client, a FileStore on
// a shared directory). Fills node_rank, nnodes, world_size, rank_offset, local_world_size,
// nproc_by_node, master_addr and offered_port; the caller fills the rest.
NodeAssignment node_rendezvous(Store& store, const NodeInfo& self, const NodeRendezvousOptions& options);

}  // namespace ddp::rdzv
