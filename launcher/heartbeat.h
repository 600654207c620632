#pragma once
// StoreHeartbeat: Liveness (launcher/liveness.h) through the job's rdzv::Store, any backend.
//
// Protocol. Keys:
//   <run_id>/heartbeat/<id>        a counter: launcher <id> adds 1 every interval, in every round
//   <run_id>/round/<n>/liveness    round n's report, "<pass> <all_beat_pass>[ <lost id>...]":
//                                  written (set) after each pass by round n's checker only, so
//                                  no writer can clobber another's report
// In each round one launcher, the round's first node with an id (node 0), is the checker. Every
// launcher adds 1 to its own counter every interval;
//   - the checker, every half interval, reads every other node's counter (one pass) and writes
//     the report: the pass number, the latest pass by which every node not lost was seen
//     changing, the ids of the nodes whose counter stood still for the bound (timed from the pass
//     before its last change, at most half an interval before it was seen), in the order found;
//   - every other launcher wakes once per interval, beats and reads the report: a node it lists
//     is lost, and so is the checker when the report's pass stands still for the bound.
// Requests per interval: 2N + 1 at the checker, 2 at every other launcher (was N^2). A node whose
// last beat was at b is named by the checker by b + bound, by the others by b + bound + one
// interval, after at least bound - interval/2 of silence. Durations are timed on the reader's
// own clock; no clocks are compared across hosts.
//
// A store this launcher cannot reach for the whole bound (no request answered) is store_lost(),
// with what the heartbeat was doing and with whom. One thread, with its own store connection
// (open_store), so a slow request of the agent never delays a beat.
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
  // Called on the heartbeat's thread when it finds a node, or the store, lost (wakes the agent).
  std::function<void()> on_loss;
};

// The ids a round's report (RoundKeys::liveness()'s value) lists as lost; none for a malformed one.
std::vector<std::string> lost_in_report(const std::string& report);

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
