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
#include <functional>
#include <mutex>
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

// Shared by implementations: the store_lost() message once `service` ("heartbeat to <store>")
// has not answered since `reached` for `lost_after` (the join timeout while `joining`, else the
// bound), ending in the last request's error when there was one.
std::string no_answer_message(const std::string& service, Clock::time_point reached, bool joining,
                              Millis lost_after, const std::string& last_error);
// Shared by implementations (under their lock): adds `peer` to `lost` and sets `is_lost`, unless
// it was set already. True when the peer was added: found lost just now.
bool note_lost(const LivenessPeer& peer, bool& is_lost, std::vector<LivenessPeer>& lost);
// Shared by implementations: runs `on_loss`, when set, with `lock` released for the call (the
// callback may call back in).
void report_loss(std::unique_lock<std::mutex>& lock, const std::function<void()>& on_loss);

}  // namespace ddp::launcher
