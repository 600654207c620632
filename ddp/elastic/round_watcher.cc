#include "ddp/elastic/round_watcher.h"

#include "common/error.h"
#include "common/log.h"
#include "rendezvous/job_records.h"

namespace ddp::elastic {
namespace {
// A watch lasts as long as the round: each wait on the own connection is long, and a timeout
// only starts the next one.
constexpr Millis kOwnWait{3'600'000};
struct Stopped {};  // ends the wait when the watcher stops
}  // namespace

RoundWatcher::RoundWatcher(Options options) : o_(std::move(options)) {
  DDP_CHECK(o_.store != nullptr, "RoundWatcher needs a store");
  thread_ = std::thread([this] { run(); });
}

RoundWatcher::~RoundWatcher() {
  std::shared_ptr<rdzv::Store> own;
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
    own = own_;
  }
  if (own) own->interrupt();
  if (thread_.joinable()) thread_.join();
}

bool RoundWatcher::fired() const {
  std::lock_guard<std::mutex> lock(mu_);
  return fired_;
}

bool RoundWatcher::stopping() const {
  std::lock_guard<std::mutex> lock(mu_);
  return stop_;
}

void RoundWatcher::run() noexcept {
  try {
    watch();
  } catch (const Stopped&) {
  } catch (const std::exception& e) {
    if (!stopping()) logger("elastic")->warn("watching round {}'s outcome ended: {}", o_.round, e.what());
  } catch (...) {
  }
}

std::shared_ptr<rdzv::Store> RoundWatcher::open() {
  std::shared_ptr<rdzv::Store> own = o_.store->clone();
  if (!own) return o_.store;
  std::lock_guard<std::mutex> lock(mu_);
  if (stop_) return nullptr;
  own_ = own;
  return own;
}

void RoundWatcher::watch() {
  const std::shared_ptr<rdzv::Store> store = open();
  if (!store) return;
  const Millis wait = store != o_.store ? kOwnWait : kSlice;
  rdzv::RoundRecords records(*store, o_.run_id, o_.round);
  const rdzv::RoundOutcome outcome = records.wait_outcome({.check_interrupt =
                                                               [this] {
                                                                 if (stopping()) throw Stopped{};
                                                               },
                                                           .slice = wait});
  if (!outcome.membership_change()) return;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (stop_) return;
    fired_ = true;
  }
  o_.on_change(outcome);
}

}  // namespace ddp::elastic
