#include "rendezvous/multicast_discovery.h"

#include <poll.h>

#include <algorithm>
#include <chrono>
#include <exception>

#include "common/auth.h"
#include "common/deadline.h"
#include "common/error.h"
#include "common/log.h"

// Announcing (multicast_datagram.h): at once, then with exponential backoff (initial_interval
// doubling up to max_interval), and at once again on hearing someone new, so a lost datagram
// costs one interval. A participant is known by its random instance id; the set is complete when
// exactly `world` are known. Stale: a clock off by more than max_clock_skew; replayed: a
// sequence number not above that instance's last. The launcher keeps discovery alive through its
// first node rendezvous round, workers through a barrier in the elected store.

namespace ddp::rdzv::mcast {
namespace {

using Clock = std::chrono::steady_clock;

uint64_t unix_ms() {
  return static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::milliseconds>(
                                   std::chrono::system_clock::now().time_since_epoch())
                                   .count());
}

std::string list(const std::vector<Participant>& ps) {
  std::string out;
  for (const auto& p : ps) out += (out.empty() ? "" : ", ") + p.describe();
  return out.empty() ? "none" : out;
}

}  // namespace

std::string Participant::describe() const {
  std::string out = host.empty() ? instance.substr(0, 8) : host;
  out += " (" + (addresses.empty() ? std::string("no address") : addresses.front());
  if (requested_rank >= 0) out += ", rank " + std::to_string(requested_rank) + " requested";
  return out + ")";
}

std::vector<std::string> Participant::reachable_at() const {
  std::vector<std::string> out;
  if (!source.empty()) out.push_back(source);
  for (const auto& a : addresses) {
    if (std::find(out.begin(), out.end(), a) == out.end()) out.push_back(a);
  }
  return out;
}

std::string DiscoveryStats::describe() const {
  std::string parts;
  auto add = [&](uint64_t n, const char* what) {
    if (n) parts += (parts.empty() ? "" : ", ") + std::to_string(n) + " " + what;
  };
  add(bad_mac, "wrong MAC");
  add(foreign, "other job");
  add(truncated, "truncated");
  add(oversized, "oversized");
  add(malformed, "malformed");
  add(not_ours, "not ours");
  add(bad_version, "unknown version");
  add(stale, "stale");
  add(replayed, "replayed");
  return std::to_string(ignored()) + " datagram(s) ignored" + (parts.empty() ? "" : " (" + parts + ")");
}

void assign_ranks(std::vector<Participant>& ps, int world) {
  std::vector<Participant*> by_rank(world, nullptr);
  for (auto& p : ps) {
    if (p.requested_rank < 0) continue;
    if (p.requested_rank >= world) {
      DDP_THROW(InvalidArgument, "multicast rendezvous: ", p.describe(), " asks for rank ", p.requested_rank,
                " of a world of ", world);
    }
    if (Participant* other = by_rank[p.requested_rank]) {
      DDP_THROW(InvalidArgument, "multicast rendezvous: rank ", p.requested_rank, " requested twice, by ",
                other->describe(), " and by ", p.describe(),
                ": give each node its own --node-rank (or none)");
    }
    by_rank[p.requested_rank] = &p;
  }
  std::vector<Participant*> rest;
  for (auto& p : ps) {
    if (p.requested_rank < 0) rest.push_back(&p);
  }
  auto key = [](const Participant* p) {
    return std::make_tuple(p->addresses.empty() ? std::string() : p->addresses.front(), p->host, p->instance);
  };
  std::sort(rest.begin(), rest.end(), [&](auto* a, auto* b) { return key(a) < key(b); });
  size_t next = 0;
  for (int r = 0; r < world; ++r) {
    if (by_rank[r] == nullptr && next < rest.size()) by_rank[r] = rest[next++];
  }
  for (int r = 0; r < world; ++r) {
    if (by_rank[r] != nullptr) by_rank[r]->rank = r;
  }
}

struct MulticastDiscovery::State {
  explicit State(DiscoveryOptions o) : options(std::move(o)), socket(options.socket) {}

  DiscoveryOptions options;
  MulticastSocket socket;
  InstanceId instance{};
  uint64_t seq = 0;
  std::atomic<bool> stop{false};

  mutable std::mutex mu;
  std::condition_variable cv;
  std::map<std::string, Participant> peers;  // by instance hex, self included
  std::map<std::string, uint64_t> last_seq;
  DiscoveryStats stats;
  bool complete = false;
  DiscoveryResult result;
  std::exception_ptr conflict;
  Clock::time_point conflict_at{};

  std::string where() const {
    return options.socket.group + ":" + std::to_string(options.socket.port) + " (job '" + options.job_id +
           "')";
  }

  std::vector<uint8_t> announcement() {
    Announcement a;
    a.job_id = options.job_id;
    a.host = options.host;
    a.instance = instance;
    a.seq = ++seq;
    a.time_ms = unix_ms();
    a.world = static_cast<uint32_t>(options.world);
    a.requested_rank = options.requested_rank;
    a.store_port = options.store_port;
    a.addresses = options.addresses;
    return encode(a, options.token);
  }

  void set_conflict(std::exception_ptr e) {
    if (conflict || complete) return;
    conflict = std::move(e);
    conflict_at = Clock::now();
    cv.notify_all();
  }

  // Under mu. Completes (or fails) the discovery once `world` participants are known.
  void evaluate() {
    if (complete || conflict) return;
    std::vector<Participant> ps;
    for (const auto& [id, p] : peers) ps.push_back(p);
    try {
      if (static_cast<int>(ps.size()) > options.world) {
        DDP_THROW(InvalidArgument, "multicast rendezvous on ", where(), ": ", ps.size(),
                  " participants for a world of ", options.world, ": ", list(ps),
                  " (two jobs with the same id and token?)");
      }
      // A duplicate request is an error as soon as it is seen, whoever else is missing.
      std::vector<Participant> requested;
      for (const auto& p : ps) {
        if (p.requested_rank >= 0) requested.push_back(p);
      }
      assign_ranks(requested, options.world);
      if (static_cast<int>(ps.size()) < options.world) return;
      assign_ranks(ps, options.world);
    } catch (const Error&) {
      set_conflict(std::current_exception());
      return;
    }
    result.by_rank.assign(options.world, {});
    for (const auto& p : ps) {
      result.by_rank[p.rank] = p;
      if (p.instance == hex(instance)) result.rank = p.rank;
    }
    complete = true;
    cv.notify_all();
  }

  // Returns true when a new participant was heard (the caller answers at once).
  bool handle(std::span<const uint8_t> bytes, bool truncated, const std::string& from) {
    std::lock_guard<std::mutex> lock(mu);
    ++stats.received;
    Decoded d = truncated ? Decoded{DecodeStatus::kOversized, {}} : decode(bytes, options.token);
    switch (d.status) {
      case DecodeStatus::kOk: break;
      case DecodeStatus::kTruncated: ++stats.truncated; return false;
      case DecodeStatus::kOversized: ++stats.oversized; return false;
      case DecodeStatus::kBadMagic: ++stats.not_ours; return false;
      case DecodeStatus::kBadVersion: ++stats.bad_version; return false;
      case DecodeStatus::kMalformed: ++stats.malformed; return false;
      case DecodeStatus::kBadMac: ++stats.bad_mac; return false;
    }
    const Announcement& a = d.announcement;
    if (a.job_id != options.job_id) {
      ++stats.foreign;
      return false;
    }
    const std::string id = hex(a.instance);
    if (a.instance == instance) return false;  // our own, looped back
    const uint64_t now = unix_ms();
    const uint64_t skew = static_cast<uint64_t>(options.max_clock_skew.count());
    if (a.time_ms + skew < now || a.time_ms > now + skew) {
      ++stats.stale;
      return false;
    }
    auto last = last_seq.find(id);
    if (last != last_seq.end() && a.seq <= last->second) {
      ++stats.replayed;
      return false;
    }
    last_seq[id] = a.seq;
    ++stats.accepted;
    if (static_cast<int>(a.world) != options.world) {
      set_conflict(std::make_exception_ptr(
          InvalidArgument(detail::str("multicast rendezvous on ", where(), ": ", a.host, " (", from,
                                      ") expects ", a.world, " participants, this one ", options.world,
                                      ": give every node the same --nnodes / world_size"),
                          __FILE__, __LINE__)));
      return false;
    }
    Participant p;
    p.instance = id;
    p.host = a.host;
    p.addresses = a.addresses;
    if (from != "0.0.0.0" && from != "::") p.source = from;
    p.requested_rank = a.requested_rank;
    p.store_port = a.store_port;
    const bool is_new = peers.emplace(id, p).second;
    if (is_new) evaluate();
    return is_new;
  }
};

MulticastDiscovery::MulticastDiscovery(DiscoveryOptions options) {
  if (options.world < 1)
    DDP_THROW(InvalidArgument, "multicast rendezvous: world size ", options.world, " must be >= 1");
  if (options.requested_rank >= options.world) {
    DDP_THROW(InvalidArgument, "multicast rendezvous: rank ", options.requested_rank, " is not below ",
              options.world);
  }
  // A host with many interfaces announces its first kMaxAddresses (best first); a long host name
  // is cut: neither may stop the job.
  if (options.addresses.size() > kMaxAddresses) options.addresses.resize(kMaxAddresses);
  if (options.host.size() > kMaxNameSize) options.host.resize(kMaxNameSize);
  state_ = std::make_unique<State>(std::move(options));
  auto& s = *state_;
  auth::random_bytes(s.instance.data(), s.instance.size());
  s.announcement();  // encodes once here, so a bad address or name throws to the caller
  Participant self;
  self.instance = hex(s.instance);
  self.host = s.options.host;
  self.addresses = s.options.addresses;
  self.requested_rank = s.options.requested_rank;
  self.store_port = s.options.store_port;
  {
    std::lock_guard<std::mutex> lock(s.mu);
    s.peers.emplace(self.instance, self);
    s.evaluate();
  }
  thread_ = std::thread([this] { loop(); });
}

MulticastDiscovery::~MulticastDiscovery() {
  state_->stop = true;
  if (thread_.joinable()) thread_.join();
}

void MulticastDiscovery::loop() {
  auto& s = *state_;
  Millis interval = s.options.initial_interval;
  auto next_send = Clock::now();
  std::vector<uint8_t> buffer(kMaxDatagramSize + 1);
  try {
    while (!s.stop) {
      if (Clock::now() >= next_send) {
        const bool sent = s.socket.send(s.announcement());
        {
          std::lock_guard<std::mutex> lock(s.mu);
          if (sent) ++s.stats.sent;
        }
        next_send = Clock::now() + interval;
        interval = std::min(interval * 2, s.options.max_interval);
      }
      const auto wait = std::chrono::duration_cast<Millis>(next_send - Clock::now());
      pollfd p{s.socket.fd(), POLLIN, 0};
      ::poll(&p, 1, static_cast<int>(std::clamp(wait, Millis(1), Millis(50)).count()));
      while (auto r = s.socket.receive(buffer)) {
        if (s.handle(std::span<const uint8_t>(buffer.data(), r->size),
                     r->truncated || r->size > kMaxDatagramSize, r->from)) {
          interval = s.options.initial_interval;  // someone new: answer now, so they learn about us
          next_send = Clock::now();
        }
      }
    }
  } catch (const std::exception& e) {
    logger("rendezvous")->warn("multicast discovery on {}: {}", s.where(), e.what());
    std::lock_guard<std::mutex> lock(s.mu);
    s.set_conflict(std::current_exception());
  }
}

DiscoveryResult MulticastDiscovery::wait() {
  auto& s = *state_;
  const Deadline deadline(s.options.timeout);
  std::unique_lock<std::mutex> lock(s.mu);
  while (true) {
    if (s.complete) return s.result;
    if (s.conflict) {
      // Linger so the others hear us too, then fail like them.
      const auto until = s.conflict_at + s.options.conflict_linger;
      if (Clock::now() >= until || deadline.expired()) std::rethrow_exception(s.conflict);
    } else if (deadline.expired()) {
      std::vector<Participant> ps;
      for (const auto& [id, p] : s.peers) ps.push_back(p);
      DDP_THROW(TimeoutError, "multicast rendezvous on ", s.where(), ": ", ps.size(), " of ", s.options.world,
                " participants arrived within ", s.options.timeout.count(), " ms: ", list(ps), "; ",
                s.stats.describe());
    }
    if (s.options.check_interrupt) {
      lock.unlock();
      s.options.check_interrupt();
      lock.lock();
    }
    s.cv.wait_for(lock, std::min(Millis(100), std::max(Millis(1), deadline.remaining())));
  }
}

DiscoveryStats MulticastDiscovery::stats() const {
  std::lock_guard<std::mutex> lock(state_->mu);
  return state_->stats;
}

}  // namespace ddp::rdzv::mcast
