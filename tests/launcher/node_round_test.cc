// The cross-node round protocol over an in-memory store: first writer wins, the exit barrier,
// and the keys launchers of other versions read.
#include "launcher/node_round.h"

#include <doctest/doctest.h>

#include <atomic>
#include <future>
#include <thread>

#include "common/error.h"
#include "rendezvous/hash_store.h"

using namespace ddp;
using namespace ddp::launcher;
using K = RoundOutcomeKind;

namespace {

NodeRoundOptions opts(int nnodes, Millis timeout = Millis(20'000)) {
  NodeRoundOptions o;
  o.run_id = "job";
  o.round = 2;
  o.nnodes = nnodes;
  o.timeout = timeout;
  return o;
}

}  // namespace

TEST_CASE("the first announcement wins; every node reads it; decided() sees it") {
  rdzv::HashStore store;
  NodeRound a(store, opts(2)), b(store, opts(2));
  CHECK_FALSE(a.decided());
  const auto first = RoundOutcome::failed("node 0 (h0): rank 1 exited with code 3");
  CHECK(a.announce(first) == first);
  CHECK(b.announce(RoundOutcome::interrupted("h1 got SIGTERM")) == first);
  CHECK(b.decided());
  CHECK(store.get_string("job/round/2/outcome", Millis(10)) == first.text());  // the wire text is unchanged
}

TEST_CASE("exit barrier: done once every node arrives") {
  rdzv::HashStore store;
  auto other = std::async(std::launch::async, [&] { return NodeRound(store, opts(2)).wait_outcome(1); });
  CHECK(NodeRound(store, opts(2)).wait_outcome(0) == RoundOutcome::done());
  CHECK(other.get() == RoundOutcome::done());
}

TEST_CASE("exit barrier: a failure elsewhere ends it with that failure") {
  rdzv::HashStore store;
  auto waiting = std::async(std::launch::async, [&] { return NodeRound(store, opts(2)).wait_outcome(0); });
  const auto failed = RoundOutcome::failed("node 1 (h1): rank 2 died of SIGKILL");
  CHECK(NodeRound(store, opts(2)).announce(failed) == failed);
  CHECK(waiting.get() == failed);
}

TEST_CASE("exit barrier: nodes that never come are lost, named, within the timeout") {
  rdzv::HashStore store;
  const auto out = NodeRound(store, opts(3, Millis(300))).wait_outcome(1);
  CHECK(out.kind == K::kLost);
  CHECK(out.detail.find("node(s) 0, 2 did not reach the exit barrier within 300 ms of node 1") !=
        std::string::npos);
  CHECK(NodeRound(store, opts(3)).announce(RoundOutcome::done()) == out);  // it is the round's outcome
}

TEST_CASE("waits end when check_interrupt throws") {
  rdzv::HashStore store;
  auto o = opts(2, Millis(60'000));
  int calls = 0;
  o.check_interrupt = [&] {
    if (++calls == 2) throw std::runtime_error("interrupted");
  };
  CHECK_THROWS_WITH(NodeRound(store, o).wait_outcome(0), "interrupted");
}

namespace {

// A handle on a shared store whose waits fail while `lost` is set (a store host gone).
class Handle final : public rdzv::Store {
 public:
  Handle(rdzv::Store& base, const std::atomic<bool>& lost) : base_(base), lost_(lost) {}

 protected:
  void do_set(const std::string& k, const rdzv::Bytes& v) override { base_.set(k, v); }
  rdzv::Bytes do_get(const std::string& k, Millis t) override { return base_.get(k, t); }
  int64_t do_add(const std::string& k, int64_t d) override { return base_.add(k, d); }
  rdzv::Bytes do_compare_set(const std::string& k, const rdzv::Bytes& e, const rdzv::Bytes& d) override {
    return base_.compare_set(k, e, d);
  }
  bool do_check(const std::vector<std::string>& k) override { return base_.check(k); }
  void do_wait(const std::vector<std::string>& k, Millis t) override {
    if (lost_) DDP_THROW(NetworkError, "store wait: the connection to h:1 was reset");
    base_.wait(k, t);
  }
  bool do_delete_key(const std::string& k) override { return base_.delete_key(k); }
  int64_t do_num_keys() override { return base_.num_keys(); }

 private:
  rdzv::Store& base_;
  const std::atomic<bool>& lost_;
};

}  // namespace

TEST_CASE("outcome watch: decided() with no request once some node announced, the monitor woken") {
  rdzv::HashStore store;
  std::atomic<bool> lost{false};
  std::atomic<int> wakes{0};
  OutcomeWatchOptions w;
  w.run_id = "job";
  w.open_store = [&] { return std::make_unique<Handle>(store, lost); };
  w.on_decided = [&] { ++wakes; };
  w.slice = Millis(50);  // slices end without an outcome too
  OutcomeWatch watch(std::move(w));
  watch.watch(2);
  auto o = opts(2);
  o.watch = &watch;
  NodeRound round(store, o);
  CHECK_FALSE(round.decided());
  NodeRound(store, opts(2)).announce(RoundOutcome::failed("node 1 (h1): rank 3 exited with code 1"));
  while (!round.decided()) std::this_thread::sleep_for(Millis(1));
  CHECK(wakes >= 1);
  CHECK_FALSE(watch.error());

  // The next round: not decided; a failed wait (an etcd leader election, a connection reset) is
  // not an outcome either: an error() until a wait succeeds again, then the outcome is seen.
  watch.watch(3);
  auto o3 = o;
  o3.round = 3;
  NodeRound next(store, o3);
  CHECK_FALSE(next.decided());
  lost = true;
  while (!watch.error()) std::this_thread::sleep_for(Millis(1));
  CHECK_FALSE(next.decided());
  CHECK(watch.error()->find("reset") != std::string::npos);
  const int before = wakes;
  lost = false;  // the store answers again: no longer an error
  while (watch.error()) std::this_thread::sleep_for(Millis(1));
  CHECK_FALSE(next.decided());
  CHECK(wakes == before);  // nothing to wake the monitor for
  NodeRound(store, o3).announce(RoundOutcome::done());
  while (!next.decided()) std::this_thread::sleep_for(Millis(1));
}

TEST_CASE("outcome watch: without a watch, a store that cannot be read is not decided") {
  rdzv::HashStore base;
  std::atomic<bool> lost{true};
  Handle store(base, lost);
  auto o = opts(2);
  NodeRound round(store, o);
  CHECK_FALSE(round.decided());  // check() answers: nothing announced
}

TEST_CASE("outcome watch: the destructor interrupts a wait at once, whatever the slice") {
  rdzv::HashStore store;
  std::atomic<bool> opened{false};
  OutcomeWatchOptions w;
  w.run_id = "job";
  w.open_store = [&] {
    opened = true;
    return store.clone();  // a handle of its own on the same table, as an EtcdStore's clone
  };
  w.slice = Millis(3'600'000);  // an hour: only interrupt() can end the wait
  auto watch = std::make_unique<OutcomeWatch>(std::move(w));
  watch->watch(2);
  while (!opened) std::this_thread::sleep_for(Millis(1));
  watch.reset();  // returns (the test would hang for an hour otherwise)
  CHECK_FALSE(store.check({"job/round/2/outcome"}));
}
