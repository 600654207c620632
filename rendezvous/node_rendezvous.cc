#include "rendezvous/node_rendezvous.h"

#include <algorithm>
#include <optional>
#include <sstream>

#include "common/deadline.h"
#include "common/error.h"
#include "rendezvous/job_keys.h"
#include "rendezvous/node_registration.h"
#include "rendezvous/round_layout.h"

namespace ddp::rdzv {
namespace {

constexpr Millis kFailedCheckInterval{1'000};  // how soon a waiting node sees a broken round

Registration decode(const std::string& key, const Bytes& bytes) { return decode_registration(key, bytes); }
std::string encode(const Registration& r) { return encode_registration(r); }
std::string nonce() { return registration_nonce(); }

// How a progress report reads the round: `named`, every registration (one batch of reads); else
// the count of arrivals alone (one read), from which the missing ranks follow `by_arrival`.
struct ProgressRead {
  bool named = true;
  bool by_arrival = false;
};

// The round as it stands.
NodeRendezvousProgress progress_of(Store& store, const RoundKeys& keys, const NodeRendezvousOptions& o,
                                   Millis waited, ProgressRead how) {
  NodeRendezvousProgress p;
  p.run_id = o.run_id;
  p.round = o.round;
  p.nnodes = o.nnodes;
  p.waited = waited;
  p.timeout = o.timeout;
  if (!how.named) {
    p.count = static_cast<int>(std::clamp<int64_t>(store.tickets(keys.arrived()), 0, o.nnodes));
    if (how.by_arrival)
      for (int r = p.count; r < o.nnodes; ++r) p.missing.push_back(r);
    return p;
  }
  std::vector<std::string> nodes;
  for (int r = 0; r < o.nnodes; ++r) nodes.push_back(keys.node(r));
  const std::vector<std::optional<Bytes>> registrations = store.get_present(nodes);
  for (int r = 0; r < o.nnodes; ++r) {
    const auto& reg = registrations[static_cast<size_t>(r)];
    if (!reg) {
      p.missing.push_back(r);
      continue;
    }
    p.arrived.emplace_back(r, decode(nodes[static_cast<size_t>(r)], *reg).info.host);
  }
  p.count = static_cast<int>(p.arrived.size());
  return p;
}

// The TimeoutError every waiting node reports: how many arrived, which ranks are missing.
[[noreturn]] void throw_incomplete(Store& store, const RoundKeys& keys, const NodeRendezvousOptions& o,
                                   Millis waited) {
  const NodeRendezvousProgress p = progress_of(store, keys, o, waited, {});
  std::string arrived;
  for (const auto& [r, host] : p.arrived)
    arrived += (arrived.empty() ? "" : ", ") + host + " (node " + std::to_string(r) + ")";
  std::ostringstream miss;
  for (size_t i = 0; i < p.missing.size(); ++i) miss << (i ? "," : "") << p.missing[i];
  DDP_THROW(TimeoutError, "node rendezvous (run '", o.run_id, "', round ", o.round,
            "): ", o.nnodes - static_cast<int>(p.missing.size()), " of ", o.nnodes, " nodes arrived within ",
            waited.count(), " ms; missing node rank(s) ", miss.str(),
            "; arrived: ", arrived.empty() ? "none" : arrived);
}

// Marks the round unusable and throws `why`.
[[noreturn]] void fail_round(Store& store, const RoundKeys& keys, const std::string& why) {
  store.compare_set(keys.layout(), {}, Store::to_bytes(encode_layout_failure(why)));
  DDP_THROW(InvalidArgument, why);
}

// Claims a node rank: the requested one (static), else the arrival index (set in *arrival).
int claim_rank(Store& store, const RoundKeys& keys, const NodeRendezvousOptions& o, const Registration& mine,
               int64_t* arrival_out) {
  const int64_t arrival = store.ticket(keys.arrived());
  *arrival_out = arrival;
  const std::string text = encode(mine);
  int rank = mine.info.requested_rank;
  if (rank < 0) {
    if (arrival >= o.nnodes) {
      DDP_THROW(InvalidArgument, "node rendezvous (run '", o.run_id, "', round ", o.round, "): host ",
                mine.info.host, " arrived as node ", arrival + 1, " but the job has only ", o.nnodes,
                " nodes (more launchers than --nnodes, or a stale run with the same --rdzv-id)");
    }
    rank = static_cast<int>(arrival);
  }
  Bytes now = store.compare_set(keys.node(rank), {}, Store::to_bytes(text));
  if (Store::to_string(now) != text) {
    auto other = decode(keys.node(rank), now);
    const std::string head = detail::str("node rendezvous (run '", o.run_id, "', round ", o.round, "): ");
    const std::string why =
        (other.info.requested_rank < 0) != (mine.info.requested_rank < 0)
            ? detail::str(head, "some nodes give --node-rank and others do not (host ", other.info.host,
                          " and host ", mine.info.host, "): give it on all nodes or on none")
            : detail::str(head, "node rank ", rank, " claimed twice, by host ", other.info.host,
                          " and by host ", mine.info.host,
                          " (each node needs its own --node-rank, or none for ranks by arrival)");
    fail_round(store, keys, why);
  }
  return rank;
}

// The round's shape (round_layout.h): the first node to register sets it, every other compares
// its own, so a disagreement is found by the node that brings it, in one read.
void check_shape(Store& store, const RoundKeys& keys, const NodeRendezvousOptions& o, const NodeInfo& self) {
  const bool dynamic = self.requested_rank < 0;
  const std::string mine = encode_shape({o.nnodes, dynamic, self.host});
  const std::string first = Store::to_string(first_value(store, keys.shape(), Store::to_bytes(mine)));
  if (first == mine) return;
  const auto [nnodes, first_dynamic, host] = decode_shape(keys.shape(), first);
  const std::string head = detail::str("node rendezvous (run '", o.run_id, "', round ", o.round, "): ");
  if (nnodes != o.nnodes) {
    fail_round(store, keys,
               detail::str(head, "host ", host, " was started with --nnodes ", nnodes, " but host ",
                           self.host, " with --nnodes ", o.nnodes));
  }
  if (first_dynamic != dynamic) {
    fail_round(store, keys,
               detail::str(head, "some nodes give --node-rank and others do not (host ", host, " and host ",
                           self.host, "): give it on all nodes or on none"));
  }
}

// Up to this many nodes a progress report names who arrived and who is missing (N reads, in one
// batch); above, it counts them (one read): N waiting nodes reading N registrations each would
// load the store with N^2 reads per report.
constexpr int kNamedProgressNodes = 64;

// A waiting node's slices: before each, check_interrupt; after one that timed out, the deadline
// (throw_incomplete) and a progress report when one is due.
class Slices {
 public:
  Slices(Store& store, const NodeRendezvousOptions& o, const NodeInfo& self, const Deadline& deadline)
      : store_(store), o_(o), self_(self), deadline_(deadline), keys_(o.run_id, o.round) {}
  Millis next() const {
    if (o_.check_interrupt) o_.check_interrupt();
    return std::max(Millis(1), std::min(kNodeRendezvousSlice, deadline_.remaining()));
  }
  void timed_out() {
    if (deadline_.expired()) throw_incomplete(store_, keys_, o_, deadline_.elapsed());
    if (o_.on_progress && deadline_.elapsed() >= next_report_) {
      const ProgressRead how{o_.nnodes <= kNamedProgressNodes, self_.requested_rank < 0};
      o_.on_progress(progress_of(store_, keys_, o_, deadline_.elapsed(), how));
      next_report_ = deadline_.elapsed() + std::max(o_.progress_interval, kNodeRendezvousSlice);
    }
  }

 private:
  Store& store_;
  const NodeRendezvousOptions& o_;
  const NodeInfo& self_;
  const Deadline& deadline_;
  RoundKeys keys_;
  Millis next_report_ = o_.progress_interval;
};

// The last node waits for every registration, in slices; a broken round is the layout key
// itself (fail_round), looked at once a second.
void wait_registrations(Store& store, const std::vector<std::string>& nodes, const Deadline& deadline,
                        const NodeRendezvousOptions& o, const NodeInfo& self) {
  const RoundKeys keys(o.run_id, o.round);
  Slices slices(store, o, self, deadline);
  Millis next_failed_check{0};
  while (true) {
    try {
      store.wait(nodes, slices.next());
      return;
    } catch (const TimeoutError&) {
      if (deadline.elapsed() >= next_failed_check || deadline.expired()) {
        next_failed_check = deadline.elapsed() + kFailedCheckInterval;
        if (store.check({keys.layout()})) decode_layout(keys.layout(), store.get(keys.layout()), o.nnodes);
      }
      slices.timed_out();
    }
  }
}

// Every node gets the layout, in slices: the value itself, with no wait before it (on etcd a
// read and a watch, parked between slices). A broken round is the layout too: decoding throws.
RoundLayout wait_layout(Store& store, const Deadline& deadline, const NodeRendezvousOptions& o,
                        const NodeInfo& self) {
  const RoundKeys keys(o.run_id, o.round);
  Slices slices(store, o, self, deadline);
  while (true) {
    Bytes layout;
    try {
      layout = store.get(keys.layout(), slices.next());
    } catch (const TimeoutError&) {
      slices.timed_out();
      continue;
    }
    return decode_layout(keys.layout(), layout, o.nnodes);
  }
}

// The last node to register reads every registration (they all exist then), checks them and
// writes the layout: N requests at one node instead of N at each.
void publish_layout(Store& store, const RoundKeys& keys, const NodeRendezvousOptions& o, const NodeInfo& self,
                    const Deadline& deadline) {
  std::vector<std::string> nodes;
  for (int r = 0; r < o.nnodes; ++r) nodes.push_back(keys.node(r));
  const std::vector<Bytes> registrations = store.multi_get(nodes, std::max(Millis(1), deadline.remaining()));
  RoundLayout l;
  for (int r = 0; r < o.nnodes; ++r) {
    Registration reg = decode(nodes[static_cast<size_t>(r)], registrations[static_cast<size_t>(r)]);
    if (reg.nnodes != o.nnodes) {
      fail_round(store, keys,
                 detail::str("node rendezvous (run '", o.run_id, "'): host ", reg.info.host, " (node ", r,
                             ") was started with --nnodes ", reg.nnodes, " but host ", self.host,
                             " with --nnodes ", o.nnodes));
    }
    if ((reg.info.requested_rank < 0) != (self.requested_rank < 0)) {
      fail_round(store, keys,
                 detail::str("node rendezvous (run '", o.run_id,
                             "'): some nodes give --node-rank and others do not (host ", reg.info.host,
                             " and host ", self.host, "): give it on all nodes or on none"));
    }
    l.restarts = std::max(l.restarts, reg.info.restarts);
    if (r == 0) {
      l.master_addr = reg.info.addresses.empty() ? reg.info.host : reg.info.addresses.front();
      l.master_port = reg.info.master_port;
    }
    l.nodes.push_back(std::move(reg.info));
  }
  const std::string text = encode_layout(l);
  const Bytes now = store.compare_set(keys.layout(), {}, Store::to_bytes(text));
  if (Store::to_string(now) != text) decode_layout(keys.layout(), now, o.nnodes);  // a failure, thrown
}

}  // namespace

NodeAssignment node_rendezvous(Store& store, const NodeInfo& self, const NodeRendezvousOptions& options) {
  const auto& o = options;
  if (o.nnodes < 1) DDP_THROW(InvalidArgument, "node rendezvous: nnodes must be >= 1, got ", o.nnodes);
  if (self.nproc < 1) DDP_THROW(InvalidArgument, "node rendezvous: nproc must be >= 1, got ", self.nproc);
  if (self.requested_rank >= o.nnodes) {
    DDP_THROW(InvalidArgument, "node rendezvous: node rank ", self.requested_rank, " is not below nnodes ",
              o.nnodes);
  }
  const Deadline deadline(o.timeout);
  const RoundKeys keys(o.run_id, o.round);
  check_shape(store, keys, o, self);
  Registration mine{self, o.nnodes, nonce()};
  int64_t arrival = 0;
  const int rank = claim_rank(store, keys, o, mine, &arrival);
  if (arrival == o.nnodes - 1) {  // the last to arrive: once every node registered, the layout
    std::vector<std::string> nodes;
    for (int r = 0; r < o.nnodes; ++r) nodes.push_back(keys.node(r));
    wait_registrations(store, nodes, deadline, o, self);
    publish_layout(store, keys, o, self, deadline);
  }
  const RoundLayout l = wait_layout(store, deadline, o, self);

  NodeAssignment a;
  a.node_rank = rank;
  a.nnodes = o.nnodes;
  a.run_id = o.run_id;
  a.round = o.round;
  a.world_size = 0;
  a.master_addr = l.master_addr;
  a.offered_port = l.master_port;
  a.restart_count = std::max(0, l.restarts);
  for (int r = 0; r < o.nnodes; ++r) {
    const NodeInfo& n = l.nodes[static_cast<size_t>(r)];
    a.host_by_node.push_back(n.host);
    a.id_by_node.push_back(n.id);
    if (r == rank) a.rank_offset = a.world_size;
    a.nproc_by_node.push_back(n.nproc);
    a.world_size += n.nproc;
  }
  a.local_world_size = self.nproc;
  return a;
}

}  // namespace ddp::rdzv
