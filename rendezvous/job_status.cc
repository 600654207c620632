#include "rendezvous/job_status.h"

#include "common/error.h"
#include "rendezvous/elastic_rendezvous.h"
#include "rendezvous/job_keys.h"
#include "rendezvous/node_registration.h"
#include "rendezvous/round_layout.h"

namespace ddp::rdzv {
namespace {

// Reads one job's keys; check and get only.
class JobReader {
 public:
  JobReader(Store& store, const JobStatusOptions& o) : s_(store), o_(o), job_(o.run_id) {}

  RoundKeys keys(int round) const { return job_.round(round); }
  bool has(const std::string& key) { return s_.check({key}); }
  std::optional<std::string> text(const std::string& key) {
    if (!has(key)) return std::nullopt;
    return s_.get_string(key);
  }
  // A static round's first node sets its shape; an elastic round counts arrivals.
  bool round_exists(int round) {
    return o_.elastic ? s_.tickets(keys(round).arrived()) > 0 : has(keys(round).shape());
  }

  // The newest round with an arrival (rounds have no gaps): doubling, then halving.
  int newest_round() {
    int known = 0, past = 1;
    while (round_exists(past)) {
      known = past;
      past = past * 2;
    }
    while (past - known > 1) {
      const int mid = known + (past - known) / 2;
      (round_exists(mid) ? known : past) = mid;
    }
    return known;
  }

  // The registrations of nodes 0..count-1 that exist, as statuses without ranks.
  std::vector<NodeStatus> registered(int round, int64_t count) {
    std::vector<NodeStatus> out;
    for (int64_t i = 0; i < count; ++i) {
      const std::string k = keys(round).node(i);
      const auto t = text(k);
      if (!t) continue;
      const Registration r = decode_registration(k, Store::to_bytes(*t));
      NodeStatus n;
      n.node_rank = static_cast<int>(i);
      n.host = r.info.host;
      n.id = r.info.id;
      n.nproc = r.info.nproc;
      out.push_back(std::move(n));
    }
    return out;
  }

  // The round's node count once it formed, else nullopt.
  std::optional<int64_t> formed(int round) {
    if (o_.elastic) {
      const auto count = text(keys(round).closed());
      if (!count) return std::nullopt;
      return decode_closed(keys(round).closed(), *count);
    }
    for (int i = 0; i < o_.nnodes; ++i) {
      if (!has(keys(round).node(i))) return std::nullopt;
    }
    return o_.nnodes;
  }

  // Arrivals of a round still forming: elastic counts them; static nodes register by rank.
  int64_t arrivals(int round) { return o_.elastic ? s_.tickets(keys(round).arrived()) : o_.nnodes; }

 private:
  Store& s_;
  const JobStatusOptions& o_;
  JobKeys job_;
};

void fill_round(JobReader& r, JobStatus& j, int round, int64_t nodes) {
  j.round = round;
  j.nodes = r.registered(round, nodes);
  j.world_size = 0;
  for (auto& n : j.nodes) {
    n.rank_offset = j.world_size;
    j.world_size += n.nproc;
  }
  j.outcome = r.text(RoundKeys(j.run_id, round).outcome());
}

}  // namespace

const char* to_string(NodeLiveness liveness) {
  switch (liveness) {
    case NodeLiveness::kAlive: return "alive";
    case NodeLiveness::kLost: return "lost";
    case NodeLiveness::kUnknown: return "unknown";
  }
  return "unknown";
}

std::optional<JobStatus> read_job_status(Store& store, const JobStatusOptions& options) {
  JobReader r(store, options);
  JobStatus j;
  j.run_id = options.run_id;
  j.ended = r.text(JobKeys(options.run_id).closed());
  j.left = store.tickets(JobKeys(options.run_id).left()) > 0;
  if (!r.round_exists(0)) {
    if (!j.ended && !j.left && !r.has(JobKeys(options.run_id).job_token())) return std::nullopt;
    return j;  // launchers met the store, none joined a round yet
  }
  const int newest = r.newest_round();
  if (auto k = r.formed(newest)) {
    fill_round(r, j, newest, *k);
    return j;
  }
  if (newest > 0) {
    if (auto k = r.formed(newest - 1)) fill_round(r, j, newest - 1, *k);
  }
  j.waiting = r.registered(newest, r.arrivals(newest));
  if (!j.waiting.empty() || j.round < 0) j.forming_round = newest;
  return j;
}

}  // namespace ddp::rdzv
