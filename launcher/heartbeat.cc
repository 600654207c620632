#include "launcher/heartbeat.h"

#include <algorithm>
#include <condition_variable>
#include <deque>
#include <mutex>
#include <thread>

#include "common/error.h"
#include "common/log.h"
#include "rendezvous/job_records.h"

namespace ddp::launcher {

struct StoreHeartbeat::Impl {
  // Another node of the round. The checker follows every one's counter; the others follow the
  // checker's report pass (in its entry) and learn the rest from the report.
  struct Watched {
    LivenessPeer peer;
    int64_t count = -1;  // the counter (or the report's pass) last read
    Clock::time_point changed;
    Clock::time_point changed_before{};  // the change before `changed`
    int64_t changed_pass = 0;            // checker: the pass that saw the latest change
    bool lost = false;
  };

  // What one tick works on, taken under the lock; its results are dropped when a watch() came
  // in between (another generation).
  struct Plan {
    uint64_t generation = 0;
    bool watching = false;
    bool checker = false;
    int round = 0;
    std::vector<std::string> ids;  // checker: every watched counter
  };

  StoreHeartbeatOptions o;
  mutable std::mutex mu;
  std::condition_variable cv;
  bool stop = false;
  // Guarded by mu:
  uint64_t generation = 0;
  bool watching = false;
  Clock::time_point first_watched{};  // the first watch(): a bound from then at the earliest
  LivenessRound round;
  bool checker = false;
  size_t checker_index = 0;  // not the checker: the checker's entry in `watched`
  std::vector<Watched> watched;
  std::vector<LivenessPeer> lost;
  std::optional<std::string> store_gone;
  int64_t pass = 0;                                        // checker: passes done this round
  Clock::time_point previous_pass;                         // checker: when the last pass began
  rdzv::LivenessReport report;                             // not the checker: the latest read
  std::deque<std::pair<Clock::time_point, int64_t>> seen;  // not the checker: (read at, pass)
  // The heartbeat's thread only:
  Clock::time_point reached = Clock::now();  // the last answer from the store
  std::string last_error;
  std::thread thread;

  Millis bound() const { return o.interval * o.max_attempt; }
  // Under the lock: how long an unanswered store means it is lost, and since when it counts.
  Millis lost_after_locked() const { return watching ? bound() : std::max(bound(), o.join_patience); }
  Clock::time_point lost_at_locked() const { return std::max(reached, first_watched) + lost_after_locked(); }
  // The checker passes every half interval; any other launcher wakes once per interval, to beat
  // and read the report (at 512 launchers, their wake-ups were most of the steady CPU).
  Millis tick(bool checker) const { return checker ? std::max(Millis(1), o.interval / 2) : o.interval; }

  void run() noexcept {
    std::unique_ptr<rdzv::Store> store;
    auto next = Clock::now();
    Clock::time_point beaten{};  // the last beat that reached the store
    std::unique_lock lock(mu);
    while (!stop) {
      const Plan plan = make_plan();
      const Millis t = tick(plan.watching && plan.checker);
      next += t;
      lock.unlock();
      bool found = false;
      try {
        if (!store) store = open();
        // Once per interval (every other tick of the checker's), with half a tick of slack.
        if (Clock::now() - beaten >= o.interval - t / 2) beaten = beat(*store);
        if (plan.watching) found = plan.checker ? check(*store, plan) : follow(*store, plan);
      } catch (const std::exception& e) {
        last_error = e.what();
        store.reset();  // a lost connection is not re-used: the next tick connects again
      }
      if (found && o.on_loss) o.on_loss();
      lock.lock();
      notice_store_lost(lock);
      if (next < Clock::now()) next = Clock::now();  // late (a loaded host): no burst to catch up
      cv.wait_until(lock, next, [this] { return stop; });
    }
  }

  std::unique_ptr<rdzv::Store> open() {
    try {
      auto store = o.open_store();
      reached = Clock::now();
      return store;
    } catch (const std::exception& e) {
      DDP_THROW(NetworkError, "could not connect: ", e.what());
    }
  }

  Clock::time_point beat(rdzv::Store& store) {
    try {
      rdzv::JobRecords(store, o.run_id).beat(o.id);
      reached = Clock::now();
      return reached;
    } catch (const std::exception& e) {
      DDP_THROW(NetworkError, "beating: ", e.what());
    }
  }

  Plan make_plan() const {
    Plan p{generation, watching, checker, round.round, {}};
    if (checker)
      for (const auto& w : watched) p.ids.push_back(w.peer.id);
    return p;
  }

  // Under the lock, after a tick: the store has not answered for the whole bound.
  void notice_store_lost(std::unique_lock<std::mutex>& lock) {
    if (store_gone || Clock::now() < lost_at_locked()) return;
    store_gone = no_answer_message("heartbeat to " + o.store_name, reached, !watching, lost_after_locked(),
                                   last_error);
    report_loss(lock, o.on_loss);
  }

  // The checker's pass: reads each watched counter (outside the lock: requests take time), then
  // records and writes the report. True when a node was found lost.
  bool check(rdzv::Store& store, const Plan& plan) {
    const auto started = Clock::now();
    std::vector<int64_t> counts;
    counts.reserve(plan.ids.size());
    for (const auto& id : plan.ids) {
      try {
        counts.push_back(rdzv::JobRecords(store, o.run_id).beats(id));
      } catch (const std::exception& e) {
        DDP_THROW(NetworkError, "checking round ", plan.round, "'s nodes (", id, "'s beats): ", e.what());
      }
      reached = Clock::now();
    }
    rdzv::LivenessReport r;
    bool found = false;
    {
      std::lock_guard g(mu);
      if (plan.generation != generation) return false;
      found = record_counts(counts, started, Clock::now());
      r.pass = pass;
      r.all_beat_pass = pass;
      for (const auto& w : watched) {
        if (w.lost) continue;
        r.all_beat_pass = std::min(r.all_beat_pass, w.changed_pass);
      }
      for (const auto& p : lost) r.lost.push_back(p.id);
    }
    try {
      rdzv::RoundRecords(store, o.run_id, plan.round).report_liveness(r);
    } catch (const std::exception& e) {
      DDP_THROW(NetworkError, "reporting round ", plan.round, "'s liveness: ", e.what());
    }
    reached = Clock::now();
    return found;
  }

  // Under the lock: one pass's counters (read from `started` on), in `watched` order. A changed
  // counter's beat came after the previous pass began: silence is timed from then (but from no
  // more than a tick before it was seen: a starved checker must not find live nodes silent), so
  // the checker names a node within the bound of its last beat, and the others, who read once per
  // interval, within the bound plus one interval.
  bool record_counts(const std::vector<int64_t>& counts, Clock::time_point started, Clock::time_point now) {
    ++pass;
    bool found = false;
    for (size_t i = 0; i < counts.size() && i < watched.size(); ++i) {
      auto& w = watched[i];
      if (w.lost) continue;
      if (counts[i] != w.count) {
        if (w.count >= 0) w.changed_pass = pass;  // the first read may show a beat from before
        w.count = counts[i];
        w.changed_before = w.changed;
        w.changed = std::max(previous_pass, now - tick(true));
      } else if (now - w.changed >= bound()) {
        found |= note_lost(w.peer, w.lost, lost);
      }
    }
    previous_pass = started;
    return found;
  }

  // Not the checker: reads the round's report. True when a node was found lost.
  bool follow(rdzv::Store& store, const Plan& plan) {
    rdzv::LivenessReport r;
    try {
      r = rdzv::RoundRecords(store, o.run_id, plan.round).liveness();
    } catch (const std::exception& e) {
      DDP_THROW(NetworkError, "reading round ", plan.round, "'s liveness report: ", e.what());
    }
    reached = Clock::now();
    const auto now = Clock::now();
    std::lock_guard g(mu);
    if (plan.generation != generation) return false;
    report = r;
    seen.emplace_back(now, r.pass);
    while (seen.size() > 64) seen.pop_front();
    bool found = false;
    auto& c = watched[checker_index];
    if (r.pass != c.count) {
      c.count = r.pass;
      c.changed_before = c.changed;
      c.changed = now;
    } else if (now - c.changed >= bound()) {
      found |= note_lost(c.peer, c.lost, lost);
    }
    for (const auto& id : r.lost) {
      for (auto& w : watched)
        if (w.peer.id == id) found |= note_lost(w.peer, w.lost, lost);
    }
    return found;
  }

  // Not the checker, under the lock: the report shows every node beating after `since` once a
  // pass that began after `since` and the pass after it saw each one's counter change. Passes
  // after the first one read after `since` (S) begin after it: S + 2 and on.
  bool report_beats_since(Clock::time_point since) const {
    if (watched[checker_index].lost) return true;  // nothing more to learn from its reports
    const auto first = std::find_if(seen.begin(), seen.end(), [&](const auto& s) { return s.first > since; });
    if (first == seen.end()) return false;
    return report.all_beat_pass >= first->second + 3;
  }
};

StoreHeartbeat::StoreHeartbeat(StoreHeartbeatOptions options) : impl_(std::make_unique<Impl>()) {
  DDP_CHECK(options.interval.count() > 0 && options.max_attempt > 0, "heartbeat needs a positive bound");
  DDP_CHECK(static_cast<bool>(options.open_store), "heartbeat needs a way to open its store connection");
  impl_->o = std::move(options);
  impl_->thread = std::thread([this] { impl_->run(); });
}

StoreHeartbeat::~StoreHeartbeat() {
  {
    std::lock_guard g(impl_->mu);
    impl_->stop = true;
  }
  impl_->cv.notify_all();
  impl_->thread.join();
}

void StoreHeartbeat::watch(LivenessRound round) {
  auto& d = *impl_;
  std::lock_guard g(d.mu);
  ++d.generation;
  if (!d.watching) d.first_watched = Clock::now();
  d.watching = true;
  d.watched.clear();
  d.lost.clear();
  d.pass = 0;
  d.report = rdzv::LivenessReport{};
  d.previous_pass = Clock::now();
  d.seen.clear();
  // The checker: the round's first node with an id.
  size_t first = 0;
  while (first < round.nodes.size() && round.nodes[first].id.empty()) ++first;
  const auto is_self = [&](size_t rank) {
    return static_cast<int>(rank) == round.node_rank || round.nodes[rank].id == d.o.id;
  };
  d.checker = first >= round.nodes.size() || is_self(first);
  d.checker_index = 0;
  const auto now = Clock::now();
  for (size_t rank = first; rank < round.nodes.size(); ++rank) {
    if (round.nodes[rank].id.empty() || is_self(rank)) continue;  // a launcher without liveness; this one
    if (rank == first) d.checker_index = d.watched.size();
    d.watched.push_back({round.nodes[rank], -1, now, {}, 0, false});
  }
  d.round = std::move(round);
}

std::vector<LivenessPeer> StoreHeartbeat::lost() const {
  std::lock_guard g(impl_->mu);
  return impl_->lost;
}

bool StoreHeartbeat::all_beat_since(Clock::time_point since) const {
  const auto& d = *impl_;
  std::lock_guard g(d.mu);
  if (d.watched.empty()) return true;
  if (!d.checker) return d.report_beats_since(since);
  for (const auto& w : d.watched) {
    if (!w.lost && !(w.count >= 0 && w.changed_before > since)) return false;
  }
  return true;
}

std::optional<std::string> StoreHeartbeat::store_lost() const {
  std::lock_guard g(impl_->mu);
  return impl_->store_gone;
}

Millis StoreHeartbeat::bound() const { return impl_->bound(); }

}  // namespace ddp::launcher
