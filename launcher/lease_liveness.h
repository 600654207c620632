#pragma once
// LeaseLiveness: Liveness (launcher/liveness.h) on etcd leases, for --rdzv-backend etcd
// (docs/launcher.md, "Liveness on leases"). Each launcher puts <run_id>/alive/<id> (value: its
// lease id) under a lease whose TTL is the bound, renewed every third of the TTL, at most once
// an interval; etcd deletes the key when its holder stops renewing. From its first round on, each
// launcher watches that prefix for deletions (NOPUT), from the round's first arrival's revision:
// a watched node whose key is deleted (a replayed deletion: and not back) is lost; no launcher
// reads every key. all_beat_since asks the peers' leases' time-to-live once an interval while
// asked. store_lost(): no keep-alive answered for the bound (join_patience before the first
// round; from the first round, a bound counted from its start at the earliest), naming the members. The
// constructor grants the lease (a refusal throws; no answer is left to the keeper); a keeper and a watcher
// thread, each with its own connection; the destructor revokes the lease (best effort, bounded), so a clean
// exit deletes the key at once.
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "launcher/liveness.h"
#include "rendezvous/etcd_client.h"

namespace ddp::launcher {

struct LeaseLivenessOptions {
  rdzv::EtcdClientOptions client;  // the members; timeouts are set from the interval
  std::string prefix = "/ddp/";    // the job's EtcdStore prefix
  std::string run_id = "none";
  std::string id;  // this launcher's key: unique per launcher process
  Millis interval = kDefaultKeepAliveInterval;
  int max_attempt = kDefaultKeepAliveMaxAttempt;
  // Before the first watch() (no round yet, nobody watching this lease): how long etcd may leave
  // the keep-alives unanswered before it counts as lost, at least the bound. A large job's
  // launchers all starting at once keep etcd busy for longer than the bound.
  Millis join_patience{0};
  // Called on a thread of the liveness when it finds a node, or etcd, lost (wakes the agent).
  std::function<void()> on_loss;
};

class LeaseLiveness final : public Liveness {
 public:
  explicit LeaseLiveness(LeaseLivenessOptions options);
  ~LeaseLiveness() override;
  LeaseLiveness(const LeaseLiveness&) = delete;
  LeaseLiveness& operator=(const LeaseLiveness&) = delete;

  void watch(LivenessRound round) override;
  std::vector<LivenessPeer> lost() const override;
  bool all_beat_since(Clock::time_point since) const override;
  std::optional<std::string> store_lost() const override;
  Millis bound() const override;

  int64_t lease() const;  // the lease held now (0 while none)

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace ddp::launcher
