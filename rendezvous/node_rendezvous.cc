#include "rendezvous/node_rendezvous.h"

#include <algorithm>
#include <sstream>

#include "common/deadline.h"
#include "common/error.h"
#include "rendezvous/node_registration.h"

namespace ddp::rdzv {
namespace {

std::string round_prefix(const NodeRendezvousOptions& o) {
  return o.run_id + "/round/" + std::to_string(o.round) + "/";
}

std::string node_key(const std::string& prefix, int rank) { return prefix + "node/" + std::to_string(rank); }

Registration decode(const std::string& key, const Bytes& bytes) { return decode_registration(key, bytes); }
std::string encode(const Registration& r) { return encode_registration(r); }
std::string nonce() { return registration_nonce(); }

// The round as it stands: registered nodes (rank, host) and missing ranks.
NodeRendezvousProgress progress_of(Store& store, const std::string& prefix, const NodeRendezvousOptions& o,
                                   Millis waited) {
  NodeRendezvousProgress p;
  p.run_id = o.run_id;
  p.round = o.round;
  p.nnodes = o.nnodes;
  p.waited = waited;
  p.timeout = o.timeout;
  for (int r = 0; r < o.nnodes; ++r) {
    if (!store.check({node_key(prefix, r)})) {
      p.missing.push_back(r);
      continue;
    }
    p.arrived.emplace_back(r, decode(node_key(prefix, r), store.get(node_key(prefix, r))).info.host);
  }
  return p;
}

// The TimeoutError every waiting node reports: how many arrived, which ranks are missing.
[[noreturn]] void throw_incomplete(Store& store, const std::string& prefix, const NodeRendezvousOptions& o,
                                   Millis waited) {
  const NodeRendezvousProgress p = progress_of(store, prefix, o, waited);
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

// Set by a node that found the round unusable (a rank claimed twice): the reason, for the others.
std::string failed_key(const std::string& prefix) { return prefix + "failed"; }

// Marks the round unusable and throws `why`: the nodes already waiting in this round would
// otherwise wait out their timeout.
[[noreturn]] void fail_round(Store& store, const std::string& prefix, const std::string& why) {
  store.set(failed_key(prefix), why);
  DDP_THROW(InvalidArgument, why);
}

// Claims a node rank: the requested one (static), else the arrival index.
int claim_rank(Store& store, const std::string& prefix, const NodeRendezvousOptions& o,
               const Registration& mine) {
  const int64_t arrival = store.add(prefix + "arrived", 1) - 1;
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
  Bytes now = store.compare_set(node_key(prefix, rank), {}, Store::to_bytes(text));
  if (Store::to_string(now) != text) {
    auto other = decode(node_key(prefix, rank), now);
    const std::string head = detail::str("node rendezvous (run '", o.run_id, "', round ", o.round, "): ");
    const std::string why =
        (other.info.requested_rank < 0) != (mine.info.requested_rank < 0)
            ? detail::str(head, "some nodes give --node-rank and others do not (host ", other.info.host,
                          " and host ", mine.info.host, "): give it on all nodes or on none")
            : detail::str(head, "node rank ", rank, " claimed twice, by host ", other.info.host,
                          " and by host ", mine.info.host,
                          " (each node needs its own --node-rank, or none for ranks by arrival)");
    fail_round(store, prefix, why);
  }
  return rank;
}

// Waits for every node's registration, in slices when the caller wants to check for interrupts.
void wait_all(Store& store, const std::vector<std::string>& keys, const Deadline& deadline,
              const NodeRendezvousOptions& o) {
  const std::string prefix = round_prefix(o);
  Millis next_report = o.progress_interval;
  while (true) {
    if (o.check_interrupt) o.check_interrupt();
    // Slices: between them, a round another node found broken (failed_key) ends the wait.
    Millis slice = std::min(kNodeRendezvousSlice, deadline.remaining());
    try {
      store.wait(keys, std::max(Millis(1), slice));
      return;
    } catch (const TimeoutError&) {
      if (store.check({failed_key(prefix)})) {
        DDP_THROW(InvalidArgument, store.get_string(failed_key(prefix)));
      }
      if (deadline.expired()) throw_incomplete(store, prefix, o, deadline.elapsed());
      if (o.on_progress && deadline.elapsed() >= next_report) {
        o.on_progress(progress_of(store, prefix, o, deadline.elapsed()));
        next_report = deadline.elapsed() + std::max(o.progress_interval, kNodeRendezvousSlice);
      }
    }
  }
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
  const std::string prefix = round_prefix(o);
  Registration mine{self, o.nnodes, nonce()};
  const int rank = claim_rank(store, prefix, o, mine);

  std::vector<std::string> keys;
  keys.reserve(o.nnodes);
  for (int r = 0; r < o.nnodes; ++r) keys.push_back(node_key(prefix, r));
  wait_all(store, keys, deadline, o);

  NodeAssignment a;
  a.node_rank = rank;
  a.nnodes = o.nnodes;
  a.run_id = o.run_id;
  a.round = o.round;
  a.world_size = 0;
  for (int r = 0; r < o.nnodes; ++r) {
    Registration reg = decode(keys[r], store.get(keys[r]));
    if (reg.nnodes != o.nnodes) {
      fail_round(store, prefix,
                 detail::str("node rendezvous (run '", o.run_id, "'): host ", reg.info.host, " (node ", r,
                             ") was started with --nnodes ", reg.nnodes, " but host ", self.host,
                             " with --nnodes ", o.nnodes));
    }
    if ((reg.info.requested_rank < 0) != (self.requested_rank < 0)) {
      fail_round(store, prefix,
                 detail::str("node rendezvous (run '", o.run_id,
                             "'): some nodes give --node-rank and others do not (host ", reg.info.host,
                             " and host ", self.host, "): give it on all nodes or on none"));
    }
    a.host_by_node.push_back(reg.info.host);
    a.id_by_node.push_back(reg.info.id);
    a.restart_count = std::max(a.restart_count, reg.info.restarts);
    if (r == rank) a.rank_offset = a.world_size;
    if (r == 0) a.master_addr = reg.info.addresses.empty() ? reg.info.host : reg.info.addresses.front();
    a.nproc_by_node.push_back(reg.info.nproc);
    a.world_size += reg.info.nproc;
  }
  a.local_world_size = self.nproc;
  return a;
}

}  // namespace ddp::rdzv
