#pragma once
// StoreHeartbeat: Liveness (launcher/liveness.h) through the job's rdzv::Store, any backend
// (protocol: docs/launcher.md, "Heartbeats"; records: rendezvous/job_records.h). Each launcher
// adds 1 to its heartbeat counter every interval. One launcher per round (its first node with an
// id) is the checker: every half interval it reads the other counters and writes the round's
// liveness report (rendezvous/liveness_report.h), naming the nodes whose counter stood still for
// the bound; the others read that report once an interval, and count the checker lost when its
// pass stands still for the bound. Requests per interval: 2N + 1 at the checker, 2 elsewhere. A
// node silent since b is named by b + bound (checker) or b + bound + one interval (others). A
// store not answering for the whole bound (join_patience before the first round; from the first
// round, a bound counted from its start at the earliest) is store_lost(), naming what and whom.
// One thread with its own connection (open_store): a slow request never delays a beat.
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "launcher/liveness.h"
#include "rendezvous/store.h"

namespace ddp::launcher {

struct StoreHeartbeatOptions {
  std::string run_id = "none";
  std::string id;  // this launcher's counter: unique per launcher process
  Millis interval = kDefaultKeepAliveInterval;
  int max_attempt = kDefaultKeepAliveMaxAttempt;
  // Names the store in errors: "the rendezvous store at 10.0.0.1:29400".
  std::string store_name = "the rendezvous store";
  // A connection of the heartbeat's own, opened on its thread; requests on it must give up
  // within about the interval.
  std::function<std::unique_ptr<rdzv::Store>()> open_store;
  // Before the first watch() (no round yet, nobody watching this node): how long the store may
  // leave the heartbeat unanswered before it counts as lost, at least the bound. Hundreds of
  // launchers connecting at once can keep a store host's accept queue full for longer than it.
  Millis join_patience{0};
  // Called on the heartbeat's thread when it finds a node, or the store, lost (wakes the agent).
  std::function<void()> on_loss;
};

class StoreHeartbeat final : public Liveness {
 public:
  explicit StoreHeartbeat(StoreHeartbeatOptions options);  // starts beating
  ~StoreHeartbeat() override;                              // stops and joins
  StoreHeartbeat(const StoreHeartbeat&) = delete;
  StoreHeartbeat& operator=(const StoreHeartbeat&) = delete;

  void watch(LivenessRound round) override;
  std::vector<LivenessPeer> lost() const override;
  bool all_beat_since(Clock::time_point since) const override;
  std::optional<std::string> store_lost() const override;
  Millis bound() const override;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace ddp::launcher
