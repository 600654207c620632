#include "launcher/liveness_probe.h"

#include <algorithm>
#include <map>
#include <set>
#include <thread>

#include "common/deadline.h"
#include "common/error.h"
#include "launcher/lease_liveness.h"
#include "rendezvous/etcd_store.h"
#include "rendezvous/job_records.h"

namespace ddp::launcher {
namespace {

using rdzv::NodeLiveness;
using rdzv::NodeStatus;

std::vector<NodeStatus*> every_node(rdzv::JobStatus& job) {
  std::vector<NodeStatus*> out;
  for (auto& n : job.nodes) out.push_back(&n);
  for (auto& n : job.waiting) out.push_back(&n);
  return out;
}

std::string seconds_text(Millis d) {
  const int64_t tenths = (d.count() + 50) / 100;
  return std::to_string(tenths / 10) + "." + std::to_string(tenths % 10) + " s";
}

}  // namespace

void probe_heartbeats(rdzv::Store& store, const LivenessProbeOptions& o, rdzv::JobStatus& job) {
  std::vector<NodeStatus*> nodes = every_node(job);
  std::set<std::string> lost;
  rdzv::JobRecords records(store, o.run_id);
  if (job.round >= 0) {
    if (auto report = records.round(job.round).liveness_if_written())
      lost.insert(report->lost.begin(), report->lost.end());
  }
  // The counters of the nodes not known lost, read until each moved or the window passed.
  std::map<NodeStatus*, std::optional<int64_t>> first;
  for (NodeStatus* n : nodes) {
    if (n->id.empty()) {
      n->liveness_detail = "no heartbeat id";
    } else if (lost.contains(n->id)) {
      n->liveness = NodeLiveness::kLost;
      n->liveness_detail = "silent for the heartbeat bound (the round's liveness report lists it)";
    } else {
      first[n] = records.beats_if_any(n->id);
    }
  }
  const Millis window = o.window.count() > 0 ? o.window : o.interval * 3 / 2;
  const Millis step = std::clamp(o.interval / 4, Millis(20), Millis(250));
  const Deadline deadline(window);
  std::map<NodeStatus*, Clock::time_point> beat_after;  // a beat of each moved counter came after it
  auto before = Clock::now();
  while (!first.empty()) {
    std::this_thread::sleep_for(std::min(step, std::max(Millis(1), deadline.remaining())));
    const auto now = Clock::now();
    for (auto it = first.begin(); it != first.end();) {
      if (records.beats_if_any(it->first->id) == it->second) {
        ++it;
        continue;
      }
      beat_after[it->first] = before;
      it = first.erase(it);
    }
    if (deadline.expired()) break;
    before = now;
  }
  const auto end = Clock::now();
  for (auto& [n, after] : beat_after) {
    n->liveness = NodeLiveness::kAlive;
    n->last_seen = std::chrono::duration_cast<Millis>(end - after);  // at most this long ago
    n->liveness_detail = "its heartbeat counter moved";
  }
  for (auto& [n, value] : first) {
    n->liveness_detail =
        value ? "its heartbeat stood still for " + seconds_text(window) + ", not yet past the bound"
              : "no heartbeat counter";
  }
}

void probe_leases(rdzv::EtcdStore& etcd, const LivenessProbeOptions& o, rdzv::JobStatus& job) {
  const std::string prefix = rdzv::JobKeys(o.run_id).alive_prefix();
  std::map<std::string, int64_t> leases;  // id -> lease
  for (const auto& [key, value] : etcd.read_prefix(prefix).entries) {
    leases[key.substr(prefix.size())] = rdzv::alive_lease(value);
  }
  for (NodeStatus* n : every_node(job)) {
    if (n->id.empty()) {
      n->liveness_detail = "no liveness id";
      continue;
    }
    const auto it = leases.find(n->id);
    if (it == leases.end()) {
      n->liveness = NodeLiveness::kLost;
      n->liveness_detail = "its lease key is gone (expired, or revoked as it left)";
      continue;
    }
    n->liveness = NodeLiveness::kAlive;
    n->liveness_detail = "holds lease " + std::to_string(it->second);
    if (it->second == 0) continue;
    const auto t = etcd.client().time_to_live(it->second);
    if (t.ttl < 0) {
      n->liveness = NodeLiveness::kLost;
      n->liveness_detail = "its lease expired";
    } else {
      n->last_seen = std::chrono::duration_cast<Millis>(
          std::chrono::seconds(std::max<int64_t>(0, t.granted_ttl - t.ttl)));
      n->liveness_detail =
          "lease renewed (TTL " + std::to_string(t.granted_ttl) + " s, " + std::to_string(t.ttl) + " s left)";
    }
  }
}

}  // namespace ddp::launcher
