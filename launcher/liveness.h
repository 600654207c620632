#pragma once
// Liveness: which launchers of the current round are alive, as this launcher sees it.
// Contract (every implementation): each launcher proves it is alive every keep_alive_interval; a
// node of the round silent for bound() (interval x max_attempt) is lost, and every other node
// learns it within about bound() plus one interval. All the round loop (launcher/agent_loop.h)
// may use, so implementations swap freely: StoreHeartbeat (heartbeat.h, any rdzv::Store) and
// LeaseLiveness (lease_liveness.h, etcd leases). Costs grow as O(N) in the node count in total:
// no launcher polls every peer every interval (docs/launcher.md, "Heartbeats").
// Threading: implementations work on a thread of their own (no request of the agent delays a
// beat); every method is thread-safe. They never throw after construction: a service they cannot
// reach is store_lost().
#include <optional>
#include <string>
#include <vector>

#include "common/timeouts.h"

namespace ddp::launcher {

struct LivenessPeer {
  std::string id;    // the launcher's unique id (rdzv::NodeInfo::id); empty: a node without liveness
  std::string name;  // what messages call it: "node 2 (host-b)"
};

// One round's membership as the rendezvous agreed it.
struct LivenessRound {
  int round = 0;
  int node_rank = 0;                // this launcher's
  std::vector<LivenessPeer> nodes;  // by node rank, this launcher included
};

class Liveness {
 public:
  Liveness() = default;
  virtual ~Liveness() = default;
  Liveness(const Liveness&) = delete;
  Liveness& operator=(const Liveness&) = delete;

  // Watches the other nodes of this round from now on (each gets a full bound from now),
  // forgetting the previous round and its losses. Called once per round joined.
  virtual void watch(LivenessRound round) = 0;
  // Nodes of the round found lost since watch(), in the order they were found.
  virtual std::vector<LivenessPeer> lost() const = 0;
  // Whether every node of the round not lost was seen alive after `since` (proof that a beat
  // happened after it, not only a value read after it). About 2 intervals after `since`.
  virtual bool all_beat_since(Clock::time_point since) const = 0;
  // Why the service liveness goes through (the store, etcd) has been unreachable for the whole
  // bound: says what was tried and with whom. nullopt while it answers.
  virtual std::optional<std::string> store_lost() const = 0;
  virtual Millis bound() const = 0;
};

}  // namespace ddp::launcher
