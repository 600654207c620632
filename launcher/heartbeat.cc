#include "launcher/heartbeat.h"

#include <condition_variable>
#include <mutex>
#include <thread>

#include "common/error.h"
#include "common/log.h"

namespace ddp::launcher {

std::string heartbeat_key(const std::string& run_id, const std::string& id) {
  return run_id + "/heartbeat/" + id;
}

struct Heartbeat::Impl {
  struct Watched {
    HeartbeatPeer peer;
    int64_t count = -1;
    Clock::time_point changed;
    Clock::time_point changed_before{};  // the change before `changed`
    bool lost = false;
  };

  HeartbeatOptions o;
  mutable std::mutex mu;
  std::condition_variable cv;
  bool stop = false;
  std::vector<Watched> watched;           // guarded by mu
  std::vector<HeartbeatPeer> lost;        // guarded by mu
  std::optional<std::string> store_gone;  // guarded by mu
  std::thread thread;

  Millis bound() const { return o.interval * o.max_attempt; }

  void run() noexcept {
    std::unique_ptr<rdzv::Store> store;
    Clock::time_point reached = Clock::now();
    std::string last_error = "not connected yet";
    std::unique_lock lock(mu);
    while (!stop) {
      lock.unlock();
      try {
        if (!store) store = o.open_store();
        store->add(heartbeat_key(o.run_id, o.id), 1);
        reached = Clock::now();
        if (check_peers(*store) && o.on_loss) o.on_loss();
      } catch (const std::exception& e) {
        last_error = e.what();
        store.reset();  // a lost connection is not re-used: the next beat connects again
      }
      lock.lock();
      if (Clock::now() - reached >= bound() && !store_gone) {
        store_gone = last_error;
        if (o.on_loss) {
          lock.unlock();
          o.on_loss();
          lock.lock();
        }
      }
      cv.wait_for(lock, o.interval, [this] { return stop; });
    }
  }

  // Reads each watched counter (outside the lock: requests take time), then records; true when
  // a peer was found lost.
  bool check_peers(rdzv::Store& store) {
    std::vector<HeartbeatPeer> peers;
    {
      std::lock_guard g(mu);
      for (const auto& w : watched) peers.push_back(w.peer);
    }
    std::vector<int64_t> counts;
    counts.reserve(peers.size());
    for (const auto& p : peers) counts.push_back(store.add(heartbeat_key(o.run_id, p.id), 0));
    const auto now = Clock::now();
    bool found = false;
    std::lock_guard g(mu);
    for (size_t i = 0; i < peers.size(); ++i) {
      for (auto& w : watched) {
        if (w.peer.id != peers[i].id || w.lost) continue;
        if (counts[i] != w.count) {
          w.count = counts[i];
          w.changed_before = w.changed;
          w.changed = now;
        } else if (now - w.changed >= bound()) {
          w.lost = true;
          lost.push_back(w.peer);
          found = true;
        }
      }
    }
    return found;
  }
};

Heartbeat::Heartbeat(HeartbeatOptions options) : impl_(std::make_unique<Impl>()) {
  DDP_CHECK(options.interval.count() > 0 && options.max_attempt > 0, "heartbeat needs a positive bound");
  impl_->o = std::move(options);
  impl_->thread = std::thread([this] { impl_->run(); });
}

Heartbeat::~Heartbeat() {
  {
    std::lock_guard g(impl_->mu);
    impl_->stop = true;
  }
  impl_->cv.notify_all();
  impl_->thread.join();
}

void Heartbeat::watch(std::vector<HeartbeatPeer> peers) {
  std::lock_guard g(impl_->mu);
  impl_->watched.clear();
  impl_->lost.clear();
  const auto now = Clock::now();
  for (auto& p : peers) {
    if (p.id.empty() || p.id == impl_->o.id) continue;  // an older launcher without heartbeats; ourselves
    impl_->watched.push_back({std::move(p), -1, now, {}, false});
  }
}

std::vector<HeartbeatPeer> Heartbeat::lost() const {
  std::lock_guard g(impl_->mu);
  return impl_->lost;
}

bool Heartbeat::all_beat_since(Clock::time_point since) const {
  std::lock_guard g(impl_->mu);
  for (const auto& w : impl_->watched) {
    if (!w.lost && !(w.count >= 0 && w.changed_before > since)) return false;
  }
  return true;
}

std::optional<std::string> Heartbeat::store_lost() const {
  std::lock_guard g(impl_->mu);
  return impl_->store_gone;
}

Millis Heartbeat::bound() const { return impl_->bound(); }

}  // namespace ddp::launcher
