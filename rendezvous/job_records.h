#pragma once
// JobRecords, RoundRecords: a job's records in its store, typed, over any Store: the one place
// the launcher and ddp::elastic read and write them (keys: job_keys.h; values: round_outcome.h,
// in_place.h, liveness_report.h). Values another process wrote are input: a malformed one is a
// StoreError naming its key (a liveness report reads as none written yet).
// - Written once, first writer wins (compare-and-set): a round's outcome, the job's token and
//   why it closed; the caller gets the value that won.
// - Only wait_* calls block, within the Waiting given (its check_interrupt may throw); others
//   are one request, or one per node where named. Store errors propagate, naming the key.
// Cheap to construct per use; thread-safe as the Store is.
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "common/timeouts.h"
#include "rendezvous/in_place.h"
#include "rendezvous/job_keys.h"
#include "rendezvous/liveness_report.h"
#include "rendezvous/round_outcome.h"
#include "rendezvous/store.h"

namespace ddp::rdzv {

// How a wait_* call waits: up to `timeout` (none: for ever; TimeoutError when it passes), in
// slices with check_interrupt between them (without one: a single wait where there is a timeout).
struct Waiting {
  std::optional<Millis> timeout = std::nullopt;
  std::function<void()> check_interrupt = nullptr;
  Millis slice{200};
};

// Waits for `key` as `w` says and returns its value.
std::string wait_value(Store& store, const std::string& key, const Waiting& w);

class RoundRecords {
 public:
  RoundRecords(Store& store, const std::string& run_id, int round);
  int round() const { return keys_.round(); }

  // The outcome (round_outcome.h): the first announced wins; announce returns the winner.
  RoundOutcome announce(const RoundOutcome& mine);
  bool decided();
  std::optional<RoundOutcome> outcome();  // now; nullopt before any
  bool wait_decided(Millis timeout);      // false when none came within the timeout
  RoundOutcome wait_outcome(const Waiting& w);

  // The exit barrier: node `node` finished (returns how many have); nodes below nnodes that
  // have not (one request each). Counted by tickets, as `left`: every node at once, no retries.
  int64_t finish(int node);
  int64_t finished();
  std::vector<int> unfinished(int nnodes);
  // Leaving (the store host waits for the others): node `node` is leaving.
  void leave(int node);
  void wait_left(const std::vector<int>& nodes, const Waiting& w);

  // Recovery in place (in_place.h): worker `rank` can move; the launcher's assignment for it.
  void mark_in_place(int rank);
  bool in_place(int first_rank, int count);  // every one of these workers can move
  void assign(int rank, const InPlaceAssignment& a);
  InPlaceAssignment wait_assignment(int rank, const Waiting& w);
  // The workers' group store of this round: their own prefix of `store`.
  static std::shared_ptr<Store> group_store(std::shared_ptr<Store> store, const std::string& run_id,
                                            int round);

  // The heartbeat checker's report (liveness_report.h). liveness() is one request that never
  // waits, creating the key empty when missing; liveness_if_written() only reads.
  void report_liveness(const LivenessReport& r);
  LivenessReport liveness();
  std::optional<LivenessReport> liveness_if_written();

  // MASTER_PORT, chosen by node 0 for the round's workers.
  void set_master_port(int port);
  int wait_master_port(const Waiting& w);

 private:
  Store& store_;
  RoundKeys keys_;
};

class JobRecords {
 public:
  JobRecords(Store& store, std::string run_id) : store_(store), keys_(std::move(run_id)) {}
  RoundRecords round(int n) const { return RoundRecords(store_, keys_.run_id(), n); }

  // DDP_JOB_TOKEN: `candidate` unless another launcher's came first; returns the job's.
  std::string token(const std::string& candidate);
  // Why the job ended, written once: every launcher still waiting to join stops.
  void close(const std::string& why);
  std::optional<std::string> closed();
  // Launchers that left: a job with any is over (its id is not reused).
  void count_left();
  bool any_left();
  // The workers' store (file backend), published by node 0 once per job.
  void set_worker_store(const std::string& endpoint);
  std::string wait_worker_store(const Waiting& w);
  // A launcher's heartbeat counter (launcher/heartbeat.h): beat adds one; beats reads it.
  int64_t beat(const std::string& id);
  int64_t beats(const std::string& id);
  std::optional<int64_t> beats_if_any(const std::string& id);  // only reads: nullopt before any

 private:
  Store& store_;
  JobKeys keys_;
};

// The value of a launcher's alive key (etcd: JobKeys::alive, under its lease): the lease id in
// decimal. alive_lease: 0 for a value that is not one (present, its age unknown).
std::string alive_value(int64_t lease);
int64_t alive_lease(const Bytes& value);

}  // namespace ddp::rdzv
