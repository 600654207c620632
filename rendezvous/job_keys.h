#pragma once
// The job's keys: every key the launchers and workers of a job (--rdzv-id) use in its store,
// named here only, and read and written through job_records.h. Value formats are types of their
// own: node_registration.h (node/<i>), round_layout.h (shape, layout, closed), round_outcome.h
// (outcome), in_place.h (assign/<rank>), liveness_report.h (liveness); the rest are counters.
//   <run_id>/closed                 why the job ended; ends every wait to join
//   <run_id>/left                   tickets of launchers that left (marks a finished job)
//   <run_id>/job_token              DDP_JOB_TOKEN, set once
//   <run_id>/worker_store           the workers' store (file backend), set once
//   <run_id>/heartbeat/<id>         a launcher's beat counter (c10d, tcp, file)
//   <run_id>/alive/<id>             a launcher's lease (etcd): deleted when it dies
//   <run_id>/round/<n>/...          round n (RoundKeys), one per attempt or membership
#include <cstdint>
#include <string>

namespace ddp::rdzv {

// The keys of round `round`, under "<run_id>/round/<n>/".
class RoundKeys {
 public:
  RoundKeys(const std::string& run_id, int round);

  int round() const { return round_; }
  const std::string& prefix() const { return prefix_; }

  // Joining (node_rendezvous.h, elastic_rendezvous.h).
  std::string shape() const { return prefix_ + "shape"; }      // static: nnodes and rank mode
  std::string arrived() const { return prefix_ + "arrived"; }  // arrival tickets or counter
  std::string node(int64_t arrival) const { return prefix_ + "node/" + std::to_string(arrival); }
  std::string layout() const {
    return prefix_ + "layout";
  }  // static: every node's place, or why the round broke
  std::string closed() const { return prefix_ + "closed"; }  // elastic: the node count
  std::string master_port() const { return prefix_ + "master_port"; }
  // Running and ending (launcher/node_round.h, heartbeat.h).
  std::string outcome() const { return prefix_ + "outcome"; }
  std::string done() const { return prefix_ + "done"; }  // tickets of finished nodes
  std::string done(int node) const { return prefix_ + "done/" + std::to_string(node); }
  std::string left(int node) const { return prefix_ + "left/" + std::to_string(node); }
  std::string liveness() const { return prefix_ + "liveness"; }  // the checker's report
  // Recovery in place (in_place.h) and the workers' group (ddp/elastic/elastic.h).
  std::string in_place(int rank) const { return prefix_ + "in_place/" + std::to_string(rank); }
  std::string assign(int rank) const { return prefix_ + "assign/" + std::to_string(rank); }
  std::string group() const { return prefix_ + "group"; }  // a PrefixStore's prefix

 private:
  int round_ = 0;
  std::string prefix_;
};

class JobKeys {
 public:
  explicit JobKeys(std::string run_id) : run_id_(std::move(run_id)) {}

  const std::string& run_id() const { return run_id_; }
  RoundKeys round(int n) const { return RoundKeys(run_id_, n); }
  std::string closed() const { return run_id_ + "/closed"; }
  std::string left() const { return run_id_ + "/left"; }
  std::string job_token() const { return run_id_ + "/job_token"; }
  std::string worker_store() const { return run_id_ + "/worker_store"; }
  std::string heartbeat(const std::string& id) const { return run_id_ + "/heartbeat/" + id; }
  std::string alive_prefix() const { return run_id_ + "/alive/"; }
  std::string alive(const std::string& id) const { return alive_prefix() + id; }

 private:
  std::string run_id_;
};

}  // namespace ddp::rdzv
