#pragma once
// Heartbeats between the launchers of a job, through the job's store (every mode, static too).
//
// Each launcher bumps its own counter "<run_id>/heartbeat/<id>" every keep_alive_interval and
// reads the counters of the peers it watches (the other nodes of its round). A peer whose
// counter stood still for interval x max_attempt, on this launcher's own clock, is lost: its
// launcher died, or its host or link did (no clocks are compared across hosts). A store this
// launcher cannot reach for as long is lost too (with tcp, the store host's node).
//
// One thread, with its own store connection (HeartbeatOptions::open_store), so a slow request of
// the agent never delays a beat. watch(), lost() and store_lost() are thread-safe.
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "common/timeouts.h"
#include "rendezvous/store.h"

namespace ddp::launcher {

struct HeartbeatOptions {
  std::string run_id = "none";
  std::string id;  // this launcher's counter: unique per launcher process
  Millis interval = kDefaultKeepAliveInterval;
  int max_attempt = kDefaultKeepAliveMaxAttempt;
  // A connection of the heartbeat's own, opened on its thread; requests on it must give up
  // within about the interval.
  std::function<std::unique_ptr<rdzv::Store>()> open_store;
  // Called on the heartbeat's thread when it finds a peer, or the store, lost (wakes the agent).
  std::function<void()> on_loss;
};

struct HeartbeatPeer {
  std::string id;    // its counter
  std::string name;  // what messages call it: "node 2 (host-b)"
};

std::string heartbeat_key(const std::string& run_id, const std::string& id);

class Heartbeat {
 public:
  explicit Heartbeat(HeartbeatOptions options);  // starts beating
  ~Heartbeat();                                  // stops and joins
  Heartbeat(const Heartbeat&) = delete;
  Heartbeat& operator=(const Heartbeat&) = delete;

  // Watches these peers from now on (each gets a full bound from now), forgetting earlier losses.
  void watch(std::vector<HeartbeatPeer> peers);
  // Peers lost since the last watch(), in the order they were found.
  std::vector<HeartbeatPeer> lost() const;
  // Whether every watched peer not lost was seen beating after `since`: two changes of its
  // counter observed after it (the first could show a beat from before).
  bool all_beat_since(Clock::time_point since) const;
  // Why the store has been unreachable for the whole bound, else nullopt.
  std::optional<std::string> store_lost() const;
  Millis bound() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace ddp::launcher
