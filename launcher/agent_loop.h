#pragma once
// The agent's loop over rounds, one per launcher: a state machine, one transition function over
// RoundState (docs/launcher.md, "The round loop"). kRendezvous: join the next round; kRunning:
// the Supervisor reports its events (a tick, woken by the OutcomeWatch or the liveness; the
// workers gone) and at each tick the loop looks for another node's outcome, a peer lost or a node
// waiting to join, all local reads; kMovingInPlace: on `changed` with every local worker opted
// in, join the next round keeping them; kStopping: the workers stop; kExitBarrier: they
// succeeded, wait for every node's or an outcome; kDeciding: done ends the job, failed restarts
// while restarts are left, changed joins a new round, lost and interrupted end it. A worker
// failure is announced only once every other node beat after it, else the lost node is: a lost
// node never costs a restart. Fewer than MIN nodes left, or the store lost: exit 122.
#include <functional>
#include <memory>
#include <optional>
#include <string>

#include "launcher/agent.h"
#include "launcher/liveness.h"
#include "launcher/node_round.h"

namespace ddp::launcher {

struct RoundLoopContext {
  const LaunchOptions* launch = nullptr;
  Supervisor* supervisor = nullptr;
  rdzv::Store* store = nullptr;    // null: one node, nothing shared
  Liveness* liveness = nullptr;    // null: one node
  rdzv::NodeInfo* self = nullptr;  // its restarts are updated before each join
  std::string store_name;          // names the store in errors: "127.0.0.1:29400"
  // Why a store is lost, in errors: "the launcher that hosts it died or its host is unreachable".
  std::string store_lost_hint = "the launcher that hosts it died or its host is unreachable";
  // etcd: a request that failed may have met a leader election: the round goes on until the
  // liveness finds the store lost for the whole bound. Otherwise a failed request ends it.
  bool transient_store_errors = false;
  bool hosting = false;  // this launcher serves the store
  // Joins round `round` or a later one; nullopt: the job ended before this node could join.
  std::function<std::optional<rdzv::NodeAssignment>(int round)> join;
  std::function<void()> check_interrupt;  // throws to end a wait (a handled signal)
  // A store handle of the outcome watch's own (launcher/node_round.h: a thread blocks on the
  // round's outcome and wakes the supervisor); null: the monitor asks the store every tick.
  std::function<std::unique_ptr<rdzv::Store>()> open_watch_store;
};

enum class RoundState { kRendezvous, kRunning, kMovingInPlace, kStopping, kExitBarrier, kDeciding, kDone };
// "Running": as the debug log's "round loop: <from> -> <to>" lines name them.
const char* to_string(RoundState s);

class RoundLoop {
 public:
  explicit RoundLoop(RoundLoopContext context) : c_(std::move(context)) {}

  AgentOutcome run();
  int round() const { return round_; }  // the round in progress (or last joined)
  int nodes() const { return nodes_; }  // its node count
  bool lost_nodes() const { return lost_nodes_; }

 private:
  const LaunchOptions& l() const { return *c_.launch; }
  bool multi() const { return c_.store != nullptr; }
  // The transition function: the state after one step of state_.
  RoundState transition();
  RoundState rendezvous();
  RoundState running();
  RoundState moving_in_place();
  RoundState stop_workers();
  RoundState stopping();
  RoundState attempt_ended();
  RoundState exit_barrier();
  RoundState deciding();
  RoundState store_lost(const std::string& why);

  NodeRound round_of();  // the shared round of a_
  void watch_peers(const rdzv::NodeAssignment& a);
  // The monitor: announces an outcome when the membership changed; true once the round has one.
  bool monitor(NodeRound& round, const rdzv::NodeAssignment& a);
  std::optional<RoundOutcome> membership_outcome(const rdzv::NodeAssignment& a);
  // After a worker failure here: the membership outcome when a peer turns out lost, else nullopt.
  std::optional<RoundOutcome> settle(NodeRound& round, const rdzv::NodeAssignment& a);
  RoundOutcome outcome_after(const AttemptResult& r, NodeRound* shared, const rdzv::NodeAssignment& a);
  // Decides what follows `outcome`: true to join another round, false when `out` is final.
  bool decide(const RoundOutcome& outcome, const AttemptResult& r, AgentOutcome& out);
  std::string store_lost_detail(const std::string& why) const;
  // After the monitor found an outcome: the membership change the workers can follow in place
  // (every local worker opted in), else nullopt.
  std::optional<RoundOutcome> change_in_place();
  // Joins the next round with the workers kept: true when they moved (a_ and shared_ are then
  // that round's), false to stop them.
  bool move_in_place(const RoundOutcome& change);
  // While moved workers re-join: true (after announcing `failed`) once the deadline passed.
  bool rejoin_overdue(NodeRound& round, const rdzv::NodeAssignment& a);
  void begin_round(const rdzv::NodeAssignment& a);
  void start_outcome_watch();

  RoundLoopContext c_;
  std::unique_ptr<OutcomeWatch> outcome_watch_;  // null: one node, or no open_watch_store
  RoundState state_ = RoundState::kRendezvous;
  std::optional<rdzv::NodeAssignment> a_;  // the round joined
  std::optional<NodeRound> shared_;        // its cross-node protocol; none for one node
  AttemptResult result_;                   // the last attempt's
  std::optional<RoundOutcome> outcome_;    // the last attempt's round's, once known
  std::optional<RoundOutcome> change_;     // kMovingInPlace: the change the workers follow
  AgentOutcome out_;
  int next_round_ = 0;
  int known_restarts_ = -1;  // a new launcher learns the job's count from the round it joins
  int round_ = 0;
  int nodes_ = 0;
  int restarts_ = 0;  // the job's restart count as this node knows it
  bool lost_nodes_ = false;
  std::string who_;                                   // "node 1 (host)"
  std::optional<Clock::time_point> rejoin_deadline_;  // workers moved in place, not yet re-joined
};

}  // namespace ddp::launcher
