#include "rendezvous/job_records.h"

#include <algorithm>

#include "common/deadline.h"
#include "common/error.h"
#include "rendezvous/prefix_store.h"

namespace ddp::rdzv {
namespace {

constexpr const char* kSet = "1";  // the value of a flag key: its presence is what counts

std::optional<Bytes> read_present(Store& store, const std::string& key) {
  return std::move(store.get_present({key}).front());
}

// Calls attempt(slice) until it ends without a TimeoutError, as `w` says: with nothing to check
// between slices, one slice is the whole timeout (one request).
template <class Attempt>
auto in_slices(const Waiting& w, Attempt attempt) {
  const Deadline deadline(w.timeout.value_or(Millis(0)));
  while (true) {
    if (w.check_interrupt) w.check_interrupt();
    Millis slice = w.slice;
    if (w.timeout)
      slice = std::max(Millis(1),
                       w.check_interrupt ? std::min(w.slice, deadline.remaining()) : deadline.remaining());
    try {
      return attempt(slice);
    } catch (const TimeoutError&) {
      if (w.timeout && deadline.expired()) throw;
    }
  }
}

}  // namespace

std::string wait_value(Store& store, const std::string& key, const Waiting& w) {
  return in_slices(w, [&](Millis slice) { return store.get_string(key, slice); });
}

RoundRecords::RoundRecords(Store& store, const std::string& run_id, int round)
    : store_(store), keys_(run_id, round) {}

RoundOutcome RoundRecords::announce(const RoundOutcome& mine) {
  const Bytes won = store_.compare_set(keys_.outcome(), {}, Store::to_bytes(mine.text()));
  return RoundOutcome::decode(Store::to_string(won));
}

bool RoundRecords::decided() { return store_.check({keys_.outcome()}); }

std::optional<RoundOutcome> RoundRecords::outcome() {
  auto text = read_present(store_, keys_.outcome());
  if (!text) return std::nullopt;
  return RoundOutcome::decode(Store::to_string(*text));
}

bool RoundRecords::wait_decided(Millis timeout) {
  try {
    store_.wait({keys_.outcome()}, timeout);
    return true;
  } catch (const TimeoutError&) {
    return false;
  }
}

RoundOutcome RoundRecords::wait_outcome(const Waiting& w) {
  return RoundOutcome::decode(wait_value(store_, keys_.outcome(), w));
}

int64_t RoundRecords::finish(int node) {
  store_.set(keys_.done(node), kSet);
  return store_.ticket(keys_.done()) + 1;
}

int64_t RoundRecords::finished() { return store_.tickets(keys_.done()); }

std::vector<int> RoundRecords::unfinished(int nnodes) {
  std::vector<int> out;
  for (int k = 0; k < nnodes; ++k)
    if (!store_.check({keys_.done(k)})) out.push_back(k);
  return out;
}

void RoundRecords::leave(int node) { store_.set(keys_.left(node), kSet); }

void RoundRecords::wait_left(const std::vector<int>& nodes, const Waiting& w) {
  std::vector<std::string> awaited;
  for (int n : nodes) awaited.push_back(keys_.left(n));
  if (awaited.empty()) return;
  in_slices(w, [&](Millis slice) { store_.wait(awaited, slice); });
}

void RoundRecords::mark_in_place(int rank) { store_.set(keys_.in_place(rank), kSet); }

bool RoundRecords::in_place(int first_rank, int count) {
  std::vector<std::string> keys;
  keys.reserve(static_cast<size_t>(std::max(count, 0)));
  for (int r = first_rank; r < first_rank + count; ++r) keys.push_back(keys_.in_place(r));
  return store_.check(keys);
}

void RoundRecords::assign(int rank, const InPlaceAssignment& a) {
  store_.set(keys_.assign(rank), encode_in_place(a));
}

InPlaceAssignment RoundRecords::wait_assignment(int rank, const Waiting& w) {
  const std::string key = keys_.assign(rank);
  return decode_in_place(key, wait_value(store_, key, w));
}

std::shared_ptr<Store> RoundRecords::group_store(std::shared_ptr<Store> store, const std::string& run_id,
                                                 int round) {
  return std::make_shared<PrefixStore>(RoundKeys(run_id, round).group(), std::move(store));
}

void RoundRecords::report_liveness(const LivenessReport& r) {
  store_.set(keys_.liveness(), encode_liveness(r));
}

LivenessReport RoundRecords::liveness() {
  // With an empty expectation and value, compare_set returns the value, creating it empty when
  // missing: one request that never waits (get would).
  return decode_liveness(Store::to_string(store_.compare_set(keys_.liveness(), {}, {})));
}

std::optional<LivenessReport> RoundRecords::liveness_if_written() {
  auto text = read_present(store_, keys_.liveness());
  if (!text) return std::nullopt;
  return decode_liveness(Store::to_string(*text));
}

void RoundRecords::set_master_port(int port) { store_.set(keys_.master_port(), std::to_string(port)); }

int RoundRecords::wait_master_port(const Waiting& w) {
  const std::string key = keys_.master_port();
  return static_cast<int>(parse_counter(key, Store::to_bytes(wait_value(store_, key, w))));
}

std::string JobRecords::token(const std::string& candidate) {
  return Store::to_string(first_value(store_, keys_.job_token(), Store::to_bytes(candidate)));
}

void JobRecords::close(const std::string& why) {
  store_.compare_set(keys_.closed(), {}, Store::to_bytes(why));
}

std::optional<std::string> JobRecords::closed() {
  auto text = read_present(store_, keys_.closed());
  if (!text) return std::nullopt;
  return Store::to_string(*text);
}

void JobRecords::count_left() { store_.ticket(keys_.left()); }

bool JobRecords::any_left() { return store_.tickets(keys_.left()) > 0; }

void JobRecords::set_worker_store(const std::string& endpoint) { store_.set(keys_.worker_store(), endpoint); }

std::string JobRecords::wait_worker_store(const Waiting& w) {
  return wait_value(store_, keys_.worker_store(), w);
}

int64_t JobRecords::beat(const std::string& id) { return store_.add(keys_.heartbeat(id), 1); }

int64_t JobRecords::beats(const std::string& id) { return store_.add(keys_.heartbeat(id), 0); }

std::optional<int64_t> JobRecords::beats_if_any(const std::string& id) {
  const std::string key = keys_.heartbeat(id);
  auto text = read_present(store_, key);
  if (!text) return std::nullopt;
  return parse_counter(key, *text);
}

std::string alive_value(int64_t lease) { return std::to_string(lease); }

int64_t alive_lease(const Bytes& value) {
  try {
    return std::stoll(Store::to_string(value));
  } catch (const std::exception&) {
    return 0;
  }
}

}  // namespace ddp::rdzv
