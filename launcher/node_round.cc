#include "launcher/node_round.h"

#include <algorithm>
#include <condition_variable>
#include <mutex>
#include <thread>

#include "common/deadline.h"
#include "common/error.h"

namespace ddp::launcher {
RoundOutcome NodeRound::announce(const RoundOutcome& mine) { return records_.announce(mine); }

bool NodeRound::decided() noexcept {
  if (o_.watch != nullptr) return o_.watch->decided(o_.round);
  try {
    return records_.decided();
  } catch (const std::exception&) {
    return false;  // maybe a moment's trouble; a store gone for good is the liveness's store_lost()
  }
}

RoundOutcome NodeRound::wait_outcome(int node_rank) {
  if (records_.finish(node_rank) == o_.nnodes) announce(RoundOutcome::done());
  try {
    return records_.wait_outcome({.timeout = o_.timeout, .check_interrupt = o_.check_interrupt});
  } catch (const TimeoutError&) {
    std::string missing;
    for (int k : records_.unfinished(o_.nnodes)) missing += (missing.empty() ? "" : ", ") + std::to_string(k);
    return announce(RoundOutcome::lost(
        detail::str("node(s) ", missing, " did not reach the exit barrier within ", o_.timeout->count(),
                    " ms of node ", node_rank, " (the rendezvous timeout; did their launcher die?)")));
  }
}

struct OutcomeWatch::Impl {
  enum class Waited { kSeen, kWaitSlice, kFailed };

  OutcomeWatchOptions o;
  mutable std::mutex mu;
  std::condition_variable cv;
  std::thread thread;
  // Guarded by mu:
  bool stop = false;
  int round = -1;                      // the round watched; -1: none yet
  int decided = -1;                    // the latest round whose outcome was seen
  std::optional<std::string> error;    // the last request's failure, until a wait succeeds
  std::unique_ptr<rdzv::Store> store;  // the thread's handle; the destructor interrupts it

  void run() noexcept {
    Millis backoff{100};
    std::unique_lock lock(mu);
    while (!stop) {
      if (round < 0 || decided >= round) {
        cv.wait(lock);
        continue;
      }
      const int r = round;
      const Waited w = wait_once(lock, r);
      if (stop) break;
      record(lock, w, r);
      if (w != Waited::kFailed) {
        backoff = Millis(100);
        continue;
      }
      // A failed request may be a moment's trouble (an etcd leader election): try again soon. A
      // store that stays silent is the liveness's to report (store_lost), not the outcome's.
      cv.wait_for(lock, backoff, [this] { return stop; });
      backoff = std::min(backoff * 2, Millis(1000));
    }
    store.reset();
  }

  // Under the lock (released while connecting and waiting): one wait on round r's outcome.
  Waited wait_once(std::unique_lock<std::mutex>& lock, int r) {
    std::string why;
    if (!store) {
      lock.unlock();
      std::unique_ptr<rdzv::Store> opened;
      try {
        opened = o.open_store();
      } catch (const std::exception& e) {
        why = e.what();
      }
      lock.lock();
      store = std::move(opened);  // published: from now on the destructor interrupts it
      if (!store || stop) return fail(why);
    }
    rdzv::Store& s = *store;  // only this thread replaces it
    lock.unlock();
    Waited w = Waited::kSeen;
    try {
      if (!rdzv::RoundRecords(s, o.run_id, r).wait_decided(o.slice)) w = Waited::kWaitSlice;
    } catch (const std::exception& e) {
      w = Waited::kFailed;
      why = e.what();
    }
    lock.lock();
    if (w != Waited::kFailed) return w;
    store.reset();  // a failed handle is not re-used: the next wait opens another
    return fail(why);
  }

  Waited fail(const std::string& why) {
    error = why;
    return Waited::kFailed;
  }

  // Under the lock: what one wait found; wakes the monitor when the round's outcome appeared.
  void record(std::unique_lock<std::mutex>& lock, Waited w, int r) {
    if (w != Waited::kFailed) error.reset();
    if (w != Waited::kSeen) return;
    const bool was = decided >= round;
    decided = std::max(decided, r);
    if (was || decided < round || !o.on_decided) return;
    lock.unlock();
    o.on_decided();
    lock.lock();
  }
};

OutcomeWatch::OutcomeWatch(OutcomeWatchOptions options) : impl_(std::make_unique<Impl>()) {
  DDP_CHECK(static_cast<bool>(options.open_store), "an outcome watch needs a way to open its store handle");
  impl_->o = std::move(options);
  impl_->thread = std::thread([this] { impl_->run(); });
}

OutcomeWatch::~OutcomeWatch() {
  {
    std::lock_guard g(impl_->mu);
    impl_->stop = true;
    if (impl_->store) impl_->store->interrupt();  // its wait ends now, not at the slice's end
  }
  impl_->cv.notify_all();
  impl_->thread.join();
}

void OutcomeWatch::watch(int round) {
  {
    std::lock_guard g(impl_->mu);
    impl_->round = round;
  }
  impl_->cv.notify_all();
}

bool OutcomeWatch::decided(int round) const {
  std::lock_guard g(impl_->mu);
  return impl_->decided >= round;
}

std::optional<std::string> OutcomeWatch::error() const {
  std::lock_guard g(impl_->mu);
  return impl_->error;
}

}  // namespace ddp::launcher
