#include "ddp/round_watcher.h"

#include "common/error.h"
#include "common/log.h"
#include "rendezvous/in_place.h"
#include "rendezvous/tcp_store.h"

namespace ddp::elastic {
namespace {
// A watch lasts as long as the round: each wait on the own connection is long, and a timeout
// only starts the next one.
constexpr Millis kOwnWait{3'600'000};
}  // namespace

RoundWatcher::RoundWatcher(Options options) : o_(std::move(options)) {
  DDP_CHECK(o_.store != nullptr, "RoundWatcher needs a store");
  thread_ = std::thread([this] { run(); });
}

RoundWatcher::~RoundWatcher() {
  std::shared_ptr<rdzv::TCPStore> own;
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
  } catch (const std::exception& e) {
    if (!stopping()) logger("elastic")->warn("watching '{}' ended: {}", o_.key, e.what());
  } catch (...) {
  }
}

std::shared_ptr<rdzv::Store> RoundWatcher::open() {
  auto* shared = dynamic_cast<rdzv::TCPStore*>(o_.store.get());
  if (shared == nullptr) return o_.store;
  rdzv::TCPStoreOptions so;
  so.host = shared->endpoint().host;
  so.port = shared->endpoint().port;
  so.timeout = kOwnWait;
  so.job_token = o_.job_token;
  auto own = std::make_shared<rdzv::TCPStore>(so);
  std::lock_guard<std::mutex> lock(mu_);
  if (stop_) return nullptr;
  own_ = own;
  return own;
}

void RoundWatcher::watch() {
  const std::shared_ptr<rdzv::Store> store = open();
  if (!store) return;
  const Millis wait = store != o_.store ? kOwnWait : kSlice;
  std::string text;
  for (;;) {
    if (stopping()) return;
    try {
      text = store->get_string(o_.key, wait);
      break;
    } catch (const TimeoutError&) {
    }
  }
  if (!rdzv::is_membership_change(text)) return;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (stop_) return;
    fired_ = true;
  }
  o_.on_change(text);
}

}  // namespace ddp::elastic
