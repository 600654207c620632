#pragma once
// Agent: the per-node loop of ddp-launch, one per launcher process: resolve the job's store (host
// it, connect to it, or etcd: plan_store) and its token -> start the liveness -> the rounds
// (launcher/agent_loop.h) -> the outcome. Rounds end together on every node (launcher/node_round.h):
// the first node whose workers fail, that is interrupted, or that finds a peer lost or waiting
// announces the round's outcome; the others stop their workers within monitor_interval.
// Where each backend keeps the store, and where the job token comes from: docs/launcher.md
// ("Where the store lives", "etcd: no node is special", "The job token").
// Errors: rendezvous and store failures propagate as TimeoutError/NetworkError/StoreError;
// inconsistent nodes (duplicate node rank, different --nnodes) as InvalidArgument.
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "launcher/launch_options.h"
#include "launcher/supervisor.h"
#include "rendezvous/node_rendezvous.h"

namespace ddp::launcher {

// LaunchOptions plus what only the agent needs.
struct AgentOptions {
  LaunchOptions launch;
  std::optional<bool> rdzv_is_host;  // --rdzv-conf is_host=: force hosting (or not) the store
  std::string job_token;             // empty: resolved by the agent (see header comment)
  std::string local_addr;            // --local-addr: where other nodes reach this one; empty: found
  int multicast_ttl = 1;             // --rdzv-conf ttl=: TTL / hop limit of the announcements
  std::string
      multicast_interface;  // --rdzv-conf interface=: where to join the group; empty: the kernel's choice
};

enum class AgentStatus {
  kSucceeded,      // every worker of every node exited 0
  kWorkersFailed,  // this node's workers failed and no restart was left
  kInterrupted,    // a handled signal stopped the job
  kPeerFailed,     // another node failed, was interrupted or was lost (or the store was), and
                   // the job cannot go on
};

struct AgentOutcome {
  AgentStatus status = AgentStatus::kSucceeded;
  AttemptResult last;  // the last attempt on this node
  int restarts = 0;    // restarts performed
  std::string detail;  // kPeerFailed: which node and why
};

// Where the store lives and how this launcher reaches it. Pure: decided from the options.
struct StorePlan {
  enum class Kind { kHost, kConnect, kHostOrConnect, kFile, kMulticast, kEtcd };
  Kind kind = Kind::kHost;
  std::string bind_host;     // kHost/kHostOrConnect: interface to bind ("" all)
  std::string connect_host;  // where clients (other nodes, workers) reach the store
  uint16_t port = 0;         // 0: ephemeral
  std::string file_path;     // kFile
  std::string group;         // kMulticast: the group (port: its port)
};
StorePlan plan_store(const AgentOptions& options);

// Token for a static/tcp multi-node job without DDP_JOB_TOKEN: 32 hex chars, SHA-256 of the id.
std::string derive_job_token(const std::string& rdzv_id);
std::string random_hex(size_t bytes);

// The IP addresses `host` resolves to (empty when it does not resolve).
std::vector<std::string> resolve_host(const std::string& host);

// Whether `host` names this machine (localhost, its hostname, or one of its addresses).
bool is_local_host(const std::string& host);

// A free TCP port outside the kernel's ephemeral range (net::pick_free_port): one the launcher
// hands to its workers (MASTER_PORT), which bind it later.
int free_port();

// This host's addresses as others would reach it via `peer_host`: the source address of a route
// to the peer first (no packet is sent), then every other interface address, loopback last.
std::vector<std::string> local_addresses(const std::string& peer_host);

// Dry run: the assignment this node would get if every node ran the same nproc (no store, no
// rendezvous); --dry-run prints the workers' commands and environments from it.
rdzv::NodeAssignment predicted_assignment(const AgentOptions& options);

class Agent {
 public:
  // Constructs the Supervisor first, so the handled signals are blocked before any thread exists.
  explicit Agent(AgentOptions options);
  ~Agent();
  Agent(const Agent&) = delete;
  Agent& operator=(const Agent&) = delete;

  AgentOutcome run();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace ddp::launcher
