#include "launcher/lease_liveness.h"

#include <algorithm>
#include <condition_variable>
#include <map>
#include <mutex>
#include <set>
#include <thread>

#include "common/error.h"
#include "common/log.h"
#include "rendezvous/etcd_store.h"
#include "rendezvous/job_records.h"

namespace ddp::launcher {
namespace {

// The watcher blocks on its stream; watch(), all_beat_since() and the destructor wake it. This
// bounds one read anyway, and is the pause after a failed one.
constexpr Millis kWatchSlice{30'000};
constexpr Millis kRetryPause{100};
// The revoke at exit: best effort, never a long wait (etcd deletes the key at expiry anyway).
constexpr Millis kRevokeTimeout{2'000};

int64_t ttl_seconds(Millis bound) { return std::max<int64_t>(1, (bound.count() + 999) / 1000); }

// The liveness's own connections give up within about the bound, trying every member.
rdzv::EtcdClientOptions client_options(rdzv::EtcdClientOptions o, Millis interval, Millis bound) {
  o.connect_timeout = std::clamp(interval, Millis(200), Millis(2'000));
  o.attempt_timeout = std::clamp(bound / 2, Millis(500), Millis(5'000));
  o.request_timeout = std::max(bound, Millis(1'000));
  return o;
}

}  // namespace

struct LeaseLiveness::Impl {
  struct Watched {
    LivenessPeer peer;
    bool lost = false;
    // Lower bounds on the lease's renewals, one per time-to-live answer (the newest last, at
    // most kRenewalsKept). One answer alone proves nothing: a new etcd leader refreshes every
    // lease to its full TTL (the dead node's too), so a beat needs answers that advance.
    std::vector<Clock::time_point> renewals;
  };
  static constexpr size_t kRenewalsKept = 16;
  // etcd's time-to-live is in whole seconds: answers more than this apart are two renewals.
  static constexpr Millis kRenewalResolution{1000};

  // Two renewals after `since`: a lower bound past it and a later one more than the TTL's
  // resolution beyond (a leader's refresh of a dead node's lease gives one bound that stays).
  static bool renewed_twice_since(const std::vector<Clock::time_point>& renewals, Clock::time_point since) {
    auto first = Clock::time_point::max();
    auto last = Clock::time_point::min();
    for (const auto& r : renewals) {
      if (r <= since) continue;
      first = std::min(first, r);
      last = std::max(last, r);
    }
    return first != Clock::time_point::max() && last - first > kRenewalResolution;
  }

  LeaseLivenessOptions o;
  std::string alive_prefix;  // "<run_id>/alive/"
  rdzv::EtcdStore keeper_store;
  rdzv::EtcdStore watcher_store;

  mutable std::mutex mu;
  std::condition_variable cv;
  bool stop = false;
  // Guarded by mu:
  int64_t lease = 0;
  int64_t granted_ttl = 0;
  uint64_t generation = 0;            // watch() calls; the watcher reads the round anew when it changes
  uint64_t compacted_generation = 0;  // the round's history was compacted: read its keys instead
  int64_t replayed_until = 0;         // deletions up to this revision are history: confirmed by a read
  LivenessRound round;
  std::vector<Watched> watched;
  std::vector<LivenessPeer> lost;
  std::map<std::string, int64_t> leases;  // id -> lease, from the alive keys' values
  std::optional<std::string> etcd_gone;
  mutable Clock::time_point probe_until{};  // all_beat_since asked: answer it until then
  rdzv::EtcdWatch* stream = nullptr;        // the watcher's, for the destructor's cancel
  // The first watch(): from then on the bound applies, counted from then at the earliest (a
  // slow answer pending from the join is waited for a bound, not what is left of one).
  Clock::time_point first_watched{};
  // The keeper's thread only (read under mu):
  Clock::time_point reached = Clock::now();
  std::string last_error;

  std::thread keeper;
  std::thread watcher;

  explicit Impl(LeaseLivenessOptions options)
      : o(std::move(options)),
        alive_prefix(rdzv::JobKeys(o.run_id).alive_prefix()),
        keeper_store(std::make_shared<rdzv::EtcdClient>(client_options(o.client, o.interval, configured())),
                     o.prefix),
        watcher_store(std::make_shared<rdzv::EtcdClient>(client_options(o.client, o.interval, configured())),
                      o.prefix) {}

  Millis configured() const { return o.interval * o.max_attempt; }
  // A third of the lease's TTL, as etcd's own clients renew, but not more often than the interval:
  // two renewals may fail before the lease lapses.
  Millis renew_every_locked() const { return std::max(o.interval, Millis(granted_ttl * 1000 / 3)); }
  Millis bound_locked() const { return std::max(configured(), Millis(granted_ttl * 1000)); }
  // How long unanswered keep-alives mean etcd is lost: the bound once a round is watched.
  Millis lost_after_locked() const {
    return generation == 0 ? std::max(bound_locked(), o.join_patience) : bound_locked();
  }
  // When etcd counts as lost if no keep-alive is answered before.
  Clock::time_point lost_at_locked() const { return std::max(reached, first_watched) + lost_after_locked(); }

  // Grants a lease and puts this launcher's key under it. Throws what etcd threw; a lease that
  // lapsed before the put: NetworkError, as for a slow etcd.
  void register_self() {
    const auto g = keeper_store.client().grant_lease(ttl_seconds(configured()));
    try {
      keeper_store.set_with_lease(rdzv::JobKeys(o.run_id).alive(o.id),
                                  rdzv::Store::to_bytes(rdzv::alive_value(g.id)), g.id);
    } catch (const StoreError& e) {
      // The lease lapsed before a slow etcd applied the put (512 launchers starting at once): a
      // slow etcd, as an unanswered request is; the keeper grants another.
      if (e.message().find("requested lease not found") == std::string::npos) throw;
      DDP_THROW(NetworkError, "etcd let lease ", g.id,
                " expire before this launcher's key was put under it: ", e.message());
    }
    std::lock_guard g2(mu);
    lease = g.id;
    granted_ttl = g.ttl;
    reached = Clock::now();
  }

  // ---- the keeper -----------------------------------------------------------------------------

  // Renews every renew_every_locked(); wakes in between when etcd would count as lost by then.
  void run_keeper() noexcept {
    std::unique_lock lock(mu);
    auto next = Clock::now();
    while (!stop) {
      if (Clock::now() >= next) {
        next = Clock::now() + renew_every_locked();  // late (a slow etcd): no burst to catch up
        const int64_t held = lease;
        const Millis left = std::chrono::duration_cast<Millis>(lost_at_locked() - Clock::now());
        lock.unlock();
        renew(held, left);
        lock.lock();
      }
      notice_etcd_lost(lock);
      const auto lost_at = lost_at_locked();
      const bool watch_loss = !etcd_gone && lost_at > Clock::now();
      cv.wait_until(lock, watch_loss ? std::min(next, lost_at) : next, [this] { return stop; });
    }
  }

  // `left`: until etcd counts as lost; a keep-alive waits that long for its answer, at least an interval.
  void renew(int64_t held, Millis left) {
    try {
      if (held == 0) {
        register_self();
        return;
      }
      if (keeper_store.client().keep_alive(held, std::max(o.interval, left)) > 0) {
        std::lock_guard g(mu);
        reached = Clock::now();
        return;
      }
      logger("liveness")
          ->warn(
              "this launcher's etcd lease {} is gone (no keep-alive reached etcd for its TTL): the other "
              "nodes may count this one lost; granting a new one",
              held);
      {
        std::lock_guard g(mu);
        lease = 0;
      }
      register_self();
    } catch (const std::exception& e) {
      last_error = e.what();
    }
  }

  Millis bound() const {
    std::lock_guard g(mu);
    return bound_locked();
  }

  void notice_etcd_lost(std::unique_lock<std::mutex>& lock) {
    if (etcd_gone || Clock::now() < lost_at_locked()) return;
    etcd_gone = no_answer_message("lease keep-alive to " + keeper_store.client().describe(), reached,
                                  generation == 0, lost_after_locked(), last_error);
    report_loss(lock, o.on_loss);
  }

  // ---- the watcher ----------------------------------------------------------------------------

  void run_watcher() noexcept {
    std::unique_ptr<rdzv::EtcdWatch> w;
    uint64_t seen_generation = 0;
    auto next_probe = Clock::now();
    while (!stopping()) {
      bool found = false;
      try {
        const uint64_t g = current_generation();
        if (g == 0) {  // no round yet: nobody to watch (a stream now would carry every arrival)
          std::unique_lock lock(mu);
          cv.wait_for(lock, kWatchSlice, [this] { return stop || generation != 0; });
          continue;
        }
        if (!w || g != seen_generation) {
          w = resync(g, &found);
          seen_generation = g;
        }
        // A watch() during the resync found no stream to wake: read again at once.
        const Millis slice = current_generation() != seen_generation ? Millis(0) : until_next(next_probe);
        const rdzv::EtcdWatchBatch batch =
            slice > Millis(0) ? w->next(Deadline(slice)) : rdzv::EtcdWatchBatch{};
        if (batch.compacted) {
          keep_stream(nullptr);
          w.reset();  // read the keys again, and watch from there
          std::lock_guard lock(mu);
          compacted_generation = seen_generation;
          continue;
        }
        found |= apply(batch.events, seen_generation);
        if (Clock::now() >= next_probe && probing()) {
          next_probe = Clock::now() + o.interval;
          probe(seen_generation);
        }
      } catch (const std::exception& e) {
        if (stopping()) break;
        logger("liveness")->debug("watching {}: {}", alive_prefix, e.what());
        keep_stream(nullptr);
        w.reset();
        std::unique_lock lock(mu);
        cv.wait_for(lock, kRetryPause, [this] { return stop; });
      }
      if (found && o.on_loss) o.on_loss();
    }
    keep_stream(nullptr);
  }

  bool stopping() const {
    std::lock_guard g(mu);
    return stop;
  }
  uint64_t current_generation() const {
    std::lock_guard g(mu);
    return generation;
  }
  bool probing() const {
    std::lock_guard g(mu);
    return Clock::now() < probe_until;
  }
  // How long the stream may be read before the next probe is due (a slice when none is).
  Millis until_next(Clock::time_point next_probe) const {
    if (!probing()) return kWatchSlice;
    return std::clamp(std::chrono::duration_cast<Millis>(next_probe - Clock::now()), Millis(1), kWatchSlice);
  }
  // Under mu: the watcher reads its stream no longer (a wake before its read ends that read).
  void wake_watcher() const {
    if (stream != nullptr) stream->wake();
  }
  void keep_stream(rdzv::EtcdWatch* w) {
    std::lock_guard g(mu);
    stream = w;
  }

  // Watches the deletions of alive keys since the round's first arrival (every node of the round
  // put its key before it arrived): O(1) requests, where reading every key would be N at each of
  // N launchers. Where that history is gone (compacted) or unknown: reads every alive key (a
  // watched node without one is lost), then watches from that read on.
  std::unique_ptr<rdzv::EtcdWatch> resync(uint64_t g, bool* found) {
    keep_stream(nullptr);
    int round_number = 0;
    bool replay = false;
    {
      std::lock_guard lock(mu);
      round_number = round.round;
      replay = g != compacted_generation;
    }
    if (replay) {
      int64_t now = 0;
      const int64_t from =
          watcher_store.first_ticket_revision(rdzv::RoundKeys(o.run_id, round_number).arrived(), &now);
      if (from > 0) {
        {
          std::lock_guard lock(mu);
          replayed_until = now;
        }
        auto w = watcher_store.watch_prefix(alive_prefix, from, /*deletions_only=*/true);
        keep_stream(w.get());
        return w;
      }
    }
    const rdzv::EtcdSnapshot snap = watcher_store.read_prefix(alive_prefix);
    std::set<std::string> present;
    {
      std::lock_guard lock(mu);
      for (const auto& [key, value] : snap.entries) {
        const std::string id = key.substr(alive_prefix.size());
        present.insert(id);
        note_lease(id, value);
      }
      if (g == generation) {
        for (auto& w : watched) {
          if (!present.count(w.peer.id)) *found |= note_lost(w.peer, w.lost, lost);
        }
      }
    }
    auto w = watcher_store.watch_prefix(alive_prefix, snap.revision + 1, /*deletions_only=*/true);
    keep_stream(w.get());
    return w;
  }

  // Under mu.
  void note_lease(const std::string& id, const rdzv::Bytes& value) {
    try {
      leases[id] = std::stoll(rdzv::Store::to_string(value));
    } catch (const std::exception&) {
      leases.erase(id);  // not ours to read: no time-to-live for it
    }
  }

  // A watched node whose key is deleted is lost. A deletion replayed from the round's history
  // (up to replayed_until) counts only if the key is not back (a lease granted again): one read.
  bool apply(const std::vector<rdzv::etcd::Event>& events, uint64_t g) {
    std::vector<std::string> deleted;
    bool found = false;
    {
      std::lock_guard lock(mu);
      for (const auto& e : events) {
        if (!e.kv.key.starts_with(alive_prefix)) continue;
        const std::string id = e.kv.key.substr(alive_prefix.size());
        if (e.type == rdzv::etcd::Event::Type::kPut) {
          note_lease(id, e.kv.value);
          continue;
        }
        leases.erase(id);
        if (g != generation) continue;  // the next resync reads the keys as they are
        for (auto& w : watched) {
          if (w.peer.id != id || w.lost) continue;
          if (e.kv.mod_revision > replayed_until)
            found |= note_lost(w.peer, w.lost, lost);  // a deletion now: lost, as it always was
          else
            deleted.push_back(id);  // from the history: maybe granted again since
        }
      }
    }
    for (const auto& id : deleted) {
      if (watcher_store.check({rdzv::JobKeys(o.run_id).alive(id)})) continue;
      std::lock_guard lock(mu);
      if (g != generation) break;
      for (auto& w : watched) {
        if (w.peer.id == id) found |= note_lost(w.peer, w.lost, lost);
      }
    }
    return found;
  }

  // The lease ids of the watched nodes not known yet (a round watched by its history): one read of
  // every alive key, only while someone asks all_beat_since.
  void read_missing_leases() {
    {
      std::lock_guard lock(mu);
      if (std::all_of(watched.begin(), watched.end(),
                      [&](const Watched& w) { return w.lost || leases.count(w.peer.id); }))
        return;
    }
    const rdzv::EtcdSnapshot snap = watcher_store.read_prefix(alive_prefix);
    std::lock_guard lock(mu);
    for (const auto& [key, value] : snap.entries) note_lease(key.substr(alive_prefix.size()), value);
  }

  // Each watched lease's time left: a lease renewed to its full TTL at r has, when asked at
  // t >= sent, at most TTL - (t - r) left, and etcd rounds down; so r > sent + left - TTL.
  void probe(uint64_t g) {
    read_missing_leases();
    std::vector<std::pair<std::string, int64_t>> ask;
    {
      std::lock_guard lock(mu);
      for (const auto& w : watched) {
        auto it = leases.find(w.peer.id);
        if (!w.lost && it != leases.end()) ask.emplace_back(w.peer.id, it->second);
      }
    }
    for (const auto& [id, l] : ask) {
      const auto sent = Clock::now();
      const auto t = watcher_store.client().time_to_live(l);
      if (t.ttl < 0) continue;  // gone: its deletion is on the way
      const auto after = sent + std::chrono::seconds(t.ttl) - std::chrono::seconds(t.granted_ttl);
      std::lock_guard lock(mu);
      if (g != generation) return;
      for (auto& w : watched) {
        if (w.peer.id != id) continue;
        if (w.renewals.size() == kRenewalsKept) w.renewals.erase(w.renewals.begin());
        w.renewals.push_back(after);
      }
    }
  }
};

LeaseLiveness::LeaseLiveness(LeaseLivenessOptions options) {
  DDP_CHECK(options.interval.count() > 0 && options.max_attempt > 0, "liveness needs a positive bound");
  DDP_CHECK(!options.id.empty(), "liveness needs this launcher's id");
  impl_ = std::make_unique<Impl>(std::move(options));
  try {
    impl_->register_self();
  } catch (const NetworkError& e) {  // a slow etcd (a burst of starting launchers): the keeper tries again
    logger("liveness")->info("etcd did not grant this launcher's lease yet ({}); trying again", e.what());
  }
  impl_->keeper = std::thread([this] { impl_->run_keeper(); });
  impl_->watcher = std::thread([this] { impl_->run_watcher(); });
}

LeaseLiveness::~LeaseLiveness() {
  auto& d = *impl_;
  int64_t held = 0;
  {
    std::lock_guard g(d.mu);
    d.stop = true;
    if (d.stream != nullptr) d.stream->cancel();
    if (!d.etcd_gone) held = d.lease;  // etcd unreachable: no revoke to wait for
  }
  d.cv.notify_all();
  d.keeper.join();
  d.watcher.join();
  if (held == 0) return;
  try {
    d.keeper_store.client().revoke(held, std::min(kRevokeTimeout, d.bound()));
  } catch (const std::exception& e) {
    logger("liveness")->debug("revoking lease {}: {}", held, e.what());
  }
}

void LeaseLiveness::watch(LivenessRound round) {
  auto& d = *impl_;
  std::lock_guard g(d.mu);
  if (d.generation++ == 0) d.first_watched = Clock::now();
  d.watched.clear();
  d.lost.clear();
  for (size_t rank = 0; rank < round.nodes.size(); ++rank) {
    const auto& peer = round.nodes[rank];
    if (peer.id.empty() || peer.id == d.o.id || static_cast<int>(rank) == round.node_rank) continue;
    d.watched.push_back({peer, false, {}});
  }
  d.round = std::move(round);
  d.wake_watcher();
  d.cv.notify_all();  // a watcher waiting for its first round
}

std::vector<LivenessPeer> LeaseLiveness::lost() const {
  std::lock_guard g(impl_->mu);
  return impl_->lost;
}

bool LeaseLiveness::all_beat_since(Clock::time_point since) const {
  const auto& d = *impl_;
  std::lock_guard g(d.mu);
  if (Clock::now() >= d.probe_until) d.wake_watcher();  // its next read waits for the probe
  d.probe_until = Clock::now() + d.bound_locked();
  return std::all_of(d.watched.begin(), d.watched.end(), [&](const Impl::Watched& w) {
    return w.lost || Impl::renewed_twice_since(w.renewals, since);
  });
}

std::optional<std::string> LeaseLiveness::store_lost() const {
  std::lock_guard g(impl_->mu);
  return impl_->etcd_gone;
}

Millis LeaseLiveness::bound() const { return impl_->bound(); }

int64_t LeaseLiveness::lease() const {
  std::lock_guard g(impl_->mu);
  return impl_->lease;
}

}  // namespace ddp::launcher
