#pragma once
// LeaseLiveness: Liveness (launcher/liveness.h) on etcd leases, for --rdzv-backend etcd.
//
// Protocol. Each launcher grants a lease whose TTL is the bound (interval x max_attempt, in whole
// seconds, at least 1; etcd may raise it to its own minimum, and bound() then says so), puts
//   <run_id>/alive/<id>   value: the lease's id in decimal
// under it, and renews it every third of its TTL (as etcd's clients do), at most once an
// interval. A launcher that dies stops renewing: etcd deletes its key when the lease expires.
// From its first round on, every launcher watches the prefix <run_id>/alive/ for deletions (one
// stream, etcd's NOPUT filter), each round from its first arrival's revision (the round's nodes
// put their keys before): a watched node whose key is deleted and not back is lost. No read of
// N keys at N launchers; the steady cost is a keep-alive per launcher per third of the TTL.
// all_beat_since asks etcd for each peer's lease time-to-live, once per interval while someone
// asks (after a worker failure): a lease renewed after `since` proves its holder alive then.
// A lease found gone while its holder still runs (etcd unreachable from it for the TTL) is
// granted again and the key put again; the others may have counted it lost meanwhile.
// store_lost(): no keep-alive answered for the whole bound (etcd lost its quorum, or is cut
// off from this host), naming the members and the last error.
//
// The constructor grants the lease and puts the key (visible before it joins a round); etcd's
// refusal throws, no answer leaves it to the keeper (lost after the bound); then two threads, each with its
// own connection: the keeper (keep-alives) and the watcher (the stream, rounds, time-to-live). The destructor
// stops both and revokes the lease (best effort, bounded; not once etcd was found lost), so a clean exit
// deletes the key at once.
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
