#include "rendezvous/elastic_rendezvous.h"

#include <algorithm>

#include "common/deadline.h"
#include "common/error.h"
#include "rendezvous/job_keys.h"
#include "rendezvous/node_registration.h"
#include "rendezvous/round_layout.h"

namespace ddp::rdzv {
namespace {

// One round as this launcher waits in it.
class RoundWait {
 public:
  RoundWait(Store& store, const ElasticRendezvousOptions& o, int round)
      : keys(o.run_id, round), s_(store), o_(o), round_(round) {}

  const RoundKeys keys;

  // The round's node count once it closed, else nullopt (after deciding whether to close it).
  std::optional<int64_t> poll() {
    if (auto k = closed()) return k;
    const bool previous_over = round_ == 0 || s_.check({RoundKeys(o_.run_id, round_ - 1).outcome()});
    const int64_t count = s_.tickets(keys.arrived());
    const auto now = Clock::now();
    if (count != last_count_ || previous_over != previous_over_) last_change_ = now;
    last_count_ = count;
    previous_over_ = previous_over;
    if (!previous_over || count < o_.min_nodes) return std::nullopt;
    if (count >= o_.max_nodes || now - last_change_ >= o_.last_call_timeout) {
      const std::string k = encode_closed(std::min<int64_t>(count, o_.max_nodes));
      return decode_closed(keys.closed(),
                           Store::to_string(s_.compare_set(keys.closed(), {}, Store::to_bytes(k))));
    }
    return std::nullopt;
  }

  std::optional<int64_t> closed() {
    if (!s_.check({keys.closed()})) return std::nullopt;
    return decode_closed(keys.closed(), s_.get_string(keys.closed()));
  }

  int64_t arrived() { return s_.tickets(keys.arrived()); }

 private:
  Store& s_;
  const ElasticRendezvousOptions& o_;
  int round_;
  int64_t last_count_ = -1;
  bool previous_over_ = false;
  Clock::time_point last_change_ = Clock::now();
};

NodeAssignment assignment_of(Store& store, const RoundWait& w, const NodeInfo& self, int rank, int64_t nodes,
                             const ElasticRendezvousOptions& o, const Deadline& deadline) {
  std::vector<std::string> keys;
  for (int64_t i = 0; i < nodes; ++i) keys.push_back(w.keys.node(i));
  // Each node registers right after it counts itself in: only a launcher killed in between
  // leaves a hole, and then the round cannot start (join_timeout).
  const std::vector<Bytes> registrations = store.multi_get(keys, std::max(Millis(1), deadline.remaining()));
  NodeAssignment a;
  a.node_rank = rank;
  a.nnodes = static_cast<int>(nodes);
  a.run_id = o.run_id;
  a.world_size = 0;
  for (int64_t i = 0; i < nodes; ++i) {
    Registration reg = decode_registration(keys[i], registrations[static_cast<size_t>(i)]);
    if (i == rank) a.rank_offset = a.world_size;
    if (i == 0) {
      a.master_addr = reg.info.addresses.empty() ? reg.info.host : reg.info.addresses.front();
      a.offered_port = reg.info.master_port;
    }
    a.nproc_by_node.push_back(reg.info.nproc);
    a.host_by_node.push_back(reg.info.host);
    a.id_by_node.push_back(reg.info.id);
    a.restart_count = std::max(a.restart_count, reg.info.restarts);
    a.world_size += reg.info.nproc;
  }
  a.local_world_size = self.nproc;
  return a;
}

}  // namespace

int64_t waiting_in_round(Store& store, const std::string& run_id, int round) {
  return store.tickets(RoundKeys(run_id, round).arrived());
}

std::optional<NodeAssignment> elastic_rendezvous(Store& store, const NodeInfo& self,
                                                 const ElasticRendezvousOptions& o) {
  if (o.min_nodes < 1 || o.max_nodes < o.min_nodes) {
    DDP_THROW(InvalidArgument, "elastic rendezvous: need 1 <= MIN <= MAX, got ", o.min_nodes, ":",
              o.max_nodes);
  }
  const Deadline deadline(o.join_timeout);
  Registration mine{self, o.max_nodes, registration_nonce()};
  const std::string text = encode_registration(mine);
  for (int round = o.round;; ++round) {
    RoundWait w(store, o, round);
    const int64_t arrival = store.ticket(w.keys.arrived());
    if (auto k = w.closed(); k && arrival >= *k) continue;  // closed before we came: the next one
    store.set(w.keys.node(arrival), text);
    std::optional<int64_t> nodes;
    while (!(nodes = w.poll())) {
      if (o.check_interrupt) o.check_interrupt();
      if (store.check({JobKeys(o.run_id).closed()})) return std::nullopt;
      if (deadline.expired()) {
        DDP_THROW(TimeoutError, "elastic rendezvous (run '", o.run_id, "', round ", round, "): ", w.arrived(),
                  " node(s) arrived within ", o.join_timeout.count(),
                  " ms (join_timeout); the job needs at least ", o.min_nodes,
                  round > 0 ? ", and the nodes of the round before must have stopped" : "");
      }
      try {
        store.wait({w.keys.closed()},
                   std::max(Millis(1), std::min(kNodeRendezvousSlice, deadline.remaining())));
      } catch (const TimeoutError&) {
      }
    }
    if (arrival >= *nodes) continue;  // the round closed full without us: wait in the next
    NodeAssignment a = assignment_of(store, w, self, static_cast<int>(arrival), *nodes, o, deadline);
    a.round = round;
    return a;
  }
}

}  // namespace ddp::rdzv
