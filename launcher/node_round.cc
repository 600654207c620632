#include "launcher/node_round.h"

#include <algorithm>
#include <condition_variable>
#include <mutex>
#include <thread>

#include "common/deadline.h"
#include "common/error.h"

namespace ddp::launcher {
namespace {

constexpr Millis kSlice{200};  // how often waits look for a signal

struct Form {
  RoundOutcomeKind kind;
  const char* prefix;  // stored text: prefix + detail
};
constexpr Form kForms[] = {
    {RoundOutcomeKind::kFailed, "failed: "},
    {RoundOutcomeKind::kInterrupted, "interrupted: "},
    {RoundOutcomeKind::kLost, "lost: "},
    {RoundOutcomeKind::kChanged, "changed: "},
};
constexpr const char* kDoneText = "done";

}  // namespace

std::string RoundOutcome::text() const {
  if (kind == RoundOutcomeKind::kDone) return kDoneText;
  for (const auto& f : kForms) {
    if (f.kind == kind) return f.prefix + detail;
  }
  return detail;
}

RoundOutcome RoundOutcome::decode(const std::string& text) {
  if (text == kDoneText) return done();
  for (const auto& f : kForms) {
    if (text.starts_with(f.prefix)) return {f.kind, text.substr(std::string(f.prefix).size())};
  }
  return failed(text);
}

std::string round_key(const std::string& run_id, int round, const std::string& name) {
  return run_id + "/round/" + std::to_string(round) + "/" + name;
}

std::string wait_key(rdzv::Store& store, const std::string& key, std::optional<Millis> timeout,
                     const std::function<void()>& check_interrupt) {
  const Deadline deadline(timeout.value_or(Millis(0)));
  while (true) {
    if (check_interrupt) check_interrupt();
    Millis slice = timeout ? std::max(Millis(1), std::min(kSlice, deadline.remaining())) : kSlice;
    try {
      return store.get_string(key, slice);
    } catch (const TimeoutError&) {
      if (timeout && deadline.expired()) throw;
    }
  }
}

RoundOutcome NodeRound::announce(const RoundOutcome& mine) {
  auto v = store_.compare_set(key("outcome"), {}, rdzv::Store::to_bytes(mine.text()));
  return RoundOutcome::decode(rdzv::Store::to_string(v));
}

bool NodeRound::decided() noexcept {
  if (o_.watch != nullptr) return o_.watch->decided(o_.round) || o_.watch->error().has_value();
  try {
    return store_.check({key("outcome")});
  } catch (const std::exception&) {
    return true;  // the store is gone: the job cannot go on
  }
}

RoundOutcome NodeRound::wait_outcome(int node_rank) {
  store_.set(key("done/" + std::to_string(node_rank)), "1");
  if (store_.add(key("done"), 1) == o_.nnodes) announce(RoundOutcome::done());
  try {
    return RoundOutcome::decode(wait_key(store_, key("outcome"), o_.timeout, o_.check_interrupt));
  } catch (const TimeoutError&) {
    std::string missing;
    for (int k = 0; k < o_.nnodes; ++k) {
      if (store_.check({key("done/" + std::to_string(k))})) continue;
      missing += (missing.empty() ? "" : ", ") + std::to_string(k);
    }
    return announce(RoundOutcome::lost(
        detail::str("node(s) ", missing, " did not reach the exit barrier within ", o_.timeout->count(),
                    " ms of node ", node_rank, " (the rendezvous timeout; did their launcher die?)")));
  }
}

struct OutcomeWatch::Impl {
  OutcomeWatchOptions o;
  mutable std::mutex mu;
  std::condition_variable cv;
  // Guarded by mu:
  bool stop = false;
  int round = -1;                    // the round watched; -1: none yet
  int decided = -1;                  // the latest round whose outcome was seen
  std::optional<std::string> error;  // the last wait's failure, until a wait succeeds
  std::string last_error;
  std::thread thread;

  void run() noexcept {
    std::unique_ptr<rdzv::Store> store;
    Millis backoff{100};
    std::unique_lock lock(mu);
    while (!stop) {
      if (round < 0 || decided >= round) {
        cv.wait(lock);
        continue;
      }
      const int r = round;
      lock.unlock();
      bool pause = false;
      std::optional<Waited> waited;
      if (!store) {
        try {
          store = o.open_store();
        } catch (const std::exception&) {
          pause = true;  // not an error(): a store never reached is the liveness's (store_lost)
        }
      }
      if (store) {
        waited = wait(*store, r);
        if (*waited == Waited::kLost) {
          store.reset();  // a lost connection is not re-used
          pause = true;
        }
      }
      lock.lock();
      if (waited) record(lock, *waited, r);
      if (!pause) {
        backoff = Millis(100);
        continue;
      }
      cv.wait_for(lock, backoff, [this] { return stop; });
      backoff = std::min(backoff * 2, Millis(1000));
    }
  }

  enum class Waited { kSeen, kSlice, kLost };

  Waited wait(rdzv::Store& store, int r) {
    try {
      store.wait({round_key(o.run_id, r, "outcome")}, o.slice);
      return Waited::kSeen;
    } catch (const TimeoutError&) {
      return Waited::kSlice;
    } catch (const std::exception& e) {
      std::lock_guard g(mu);
      last_error = e.what();
      return Waited::kLost;
    }
  }

  // Under the lock: what one wait found; wakes the monitor when the answer to decided() changed.
  void record(std::unique_lock<std::mutex>& lock, Waited w, int r) {
    const bool was = decided >= round || error.has_value();
    if (w == Waited::kSeen) decided = std::max(decided, r);
    if (w == Waited::kLost)
      error = last_error;
    else
      error.reset();
    if ((decided >= round || error.has_value()) == was || !o.on_decided) return;
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
