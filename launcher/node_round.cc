#include "launcher/node_round.h"

#include <algorithm>

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

}  // namespace ddp::launcher
