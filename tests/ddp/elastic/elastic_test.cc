// Recovery in place (ddp/elastic/elastic.h), threads as processes over the tcp backend (or the test's
// backend) and one HashStore standing for the launchers' store; the test plays the launchers:
// it announces a membership change and writes each survivor's place in the next round.
#include "ddp/elastic/elastic.h"

#include <doctest/doctest.h>

#include <atomic>
#include <condition_variable>
#include <cstring>
#include <mutex>
#include <thread>

#include "common/error.h"
#include "rendezvous/hash_store.h"
#include "rendezvous/in_place.h"
#include "rendezvous/job_keys.h"
#include "rendezvous/tcp_store.h"
#include "tests/ddp/rank_threads.h"

using namespace ddp;

namespace {

// A counter and a step: each step adds the world size (an all_reduce of ones).
struct Counter : elastic::State {
  int64_t value = 0;
  int64_t step = 0;
  std::string save() override {
    std::string b(16, '\0');
    std::memcpy(b.data(), &value, 8);
    std::memcpy(b.data() + 8, &step, 8);
    return b;
  }
  void load(const std::string& b) override {
    REQUIRE(b.size() == 16);
    std::memcpy(&value, b.data(), 8);
    std::memcpy(&step, b.data() + 8, 8);
  }
};

struct Latch {
  std::mutex mu;
  std::condition_variable cv;
  int count = 0;
  bool open = false;
  void arrive() {
    std::lock_guard<std::mutex> lock(mu);
    ++count;
    cv.notify_all();
  }
  void wait_count(int n) {
    std::unique_lock<std::mutex> lock(mu);
    cv.wait(lock, [&] { return count >= n; });
  }
  void release() {
    std::lock_guard<std::mutex> lock(mu);
    open = true;
    cv.notify_all();
  }
  void wait_open() {
    std::unique_lock<std::mutex> lock(mu);
    cv.wait(lock, [&] { return open; });
  }
};

struct Result {
  int64_t value = 0;
  int64_t step = 0;
  int round = -1;
  int rank = -1;
  int rounds = 0;
  int groups = 0;  // on_group calls
  bool rolled_back = false;
};

// A session of one rank, rank 0 of round `round` of run `run` over `store`.
elastic::SessionOptions alone(std::shared_ptr<rdzv::Store> store, const std::string& run, int round) {
  elastic::SessionOptions so;
  so.backend = testing::test_backend();
  so.store = std::move(store);
  so.run_id = run;
  so.round = round;
  so.rank = 0;
  so.world_size = 1;
  return so;
}

}  // namespace

namespace {

// Round 0's two ranks (slots 0 and 1) step to kChangeAt and wait there while the test, playing
// the launchers, announces a node joining and writes their places in round 1; then the joining
// node's fresh worker (slot 2) starts as rank 2 of round 1. Each slot's end: results.
struct GrowInPlace {
  static constexpr int kSteps = 6, kChangeAt = 3;
  std::shared_ptr<rdzv::HashStore> store = std::make_shared<rdzv::HashStore>(Millis(60'000));
  const std::string run = "elastic_test";
  const std::string backend = testing::test_backend();
  Latch at_change;
  std::vector<Result> results = std::vector<Result>(3);
  std::vector<std::exception_ptr> errors = std::vector<std::exception_ptr>(3);

  // Every worker to its end; the first worker's error, rethrown.
  void play() {
    std::vector<std::thread> threads;
    threads.emplace_back(&GrowInPlace::worker, this, 0, 0, 0, 2);
    threads.emplace_back(&GrowInPlace::worker, this, 1, 0, 1, 2);
    at_change.wait_count(2);
    announce_join();
    at_change.release();
    threads.emplace_back(&GrowInPlace::worker, this, 2, 1, 2, 3);
    for (auto& t : threads) t.join();
    for (auto& e : errors) {
      if (e) std::rethrow_exception(e);
    }
  }

  // The launchers: round 0 changed (a node joins); old rank 0 becomes 1, old rank 1 becomes 0,
  // and the joining node's fresh worker is rank 2 of round 1.
  void announce_join() {
    store->set(rdzv::RoundKeys(run, 0).outcome(),
               "changed: 1 node(s) waiting to join; a new round with them");
    for (int old_rank : {0, 1}) {
      rdzv::InPlaceAssignment a{1, 1 - old_rank, 3, old_rank, 2, 0, 2, "127.0.0.1", 0};
      store->set(rdzv::RoundKeys(run, 0).assign(old_rank), rdzv::encode_in_place(a));
    }
  }

  elastic::SessionOptions options(int round, int rank, int world) const {
    elastic::SessionOptions so;
    so.backend = backend;
    so.store = store;
    so.run_id = run;
    so.round = round;
    so.rank = rank;
    so.world_size = world;
    so.timeout = Millis(30'000);
    so.outcome_timeout = Millis(30'000);
    so.rejoin_timeout = Millis(30'000);
    return so;
  }

  void worker(int slot, int round, int rank, int world) {
    try {
      elastic::Session session(options(round, rank, world));
      Counter state;
      Result& r = results[slot];
      elastic::RunOptions ro;
      ro.on_group = [&](const comm::ProcessGroupPtr&) { ++r.groups; };
      elastic::run(
          session, state, [&](const comm::ProcessGroupPtr& g) { train(session, state, r, slot, g); }, ro);
      r.value = state.value;
      r.step = state.step;
      r.round = session.round();
      r.rank = session.rank();
      r.rounds = session.rounds();
    } catch (...) {
      errors[slot] = std::current_exception();
    }
  }

  // Steps to kSteps, each committed; in round 0 each survivor stops at kChangeAt for the
  // launchers, with an uncommitted change that the move in place must roll back.
  void train(elastic::Session& session, Counter& state, Result& r, int slot, const comm::ProcessGroupPtr& g) {
    if (session.round() > 0 && slot < 2) r.rolled_back = state.value == 2 * kChangeAt;
    while (state.step < kSteps) {
      int64_t one = 1;
      g->all_reduce(comm::view(&one, 1))->wait();
      state.value += one;
      ++state.step;
      state.commit();
      if (session.round() == 0 && state.step == kChangeAt) {
        at_change.arrive();
        at_change.wait_open();
        state.value += 1000;  // not committed: the move in place rolls it back
        session.check();      // throws MembershipChanged
      }
    }
  }
};

}  // namespace

TEST_CASE("survivors move to a larger round in place: rolled back to the commit, state from a survivor") {
  GrowInPlace grow;
  grow.play();
  const std::vector<Result>& results = grow.results;
  constexpr int kSteps = GrowInPlace::kSteps, kChangeAt = GrowInPlace::kChangeAt;
  // 3 steps in a world of 2, then 3 in a world of 3.
  for (int slot = 0; slot < 3; ++slot) {
    CAPTURE(slot);
    CHECK(results[slot].value == 2 * kChangeAt + 3 * (kSteps - kChangeAt));
    CHECK(results[slot].step == kSteps);
    CHECK(results[slot].round == 1);
  }
  CHECK(results[0].rank == 1);
  CHECK(results[1].rank == 0);
  CHECK(results[0].rounds == 2);
  CHECK(results[2].rounds == 1);
  CHECK(results[0].groups == 2);
  CHECK(results[2].groups == 1);
  CHECK(results[0].rolled_back);
  CHECK(results[1].rolled_back);
  for (int rank = 0; rank < 3; ++rank)
    CHECK(grow.store->check({rdzv::RoundKeys(grow.run, 1).in_place(rank)}));
}

TEST_CASE("check() throws only for a membership change, and a failed round's error propagates") {
  auto store = std::make_shared<rdzv::HashStore>(Millis(60'000));
  elastic::SessionOptions so = alone(store, "check_test", 4);
  so.outcome_timeout = Millis(2'000);
  elastic::Session session(so);
  CHECK(store->check({rdzv::RoundKeys("check_test", 4).in_place(0)}));
  CHECK_NOTHROW(session.check());
  store->set(rdzv::RoundKeys("check_test", 4).outcome(), "failed: node 1: rank 3 exited with code 1");
  CHECK_NOTHROW(session.check());
  CHECK_FALSE(session.await_change());
  Counter state;
  auto fail = [](const comm::ProcessGroupPtr&) { DDP_THROW(NetworkError, "peer 1 lost"); };
  CHECK_THROWS_WITH_AS(elastic::run(session, state, fail), doctest::Contains("peer 1 lost"), NetworkError);
  store->set(rdzv::RoundKeys("check_test", 4).outcome(), "changed: node 1 (h) lost");
}

TEST_CASE("check() throws MembershipChanged once the round changed") {
  auto store = std::make_shared<rdzv::HashStore>(Millis(60'000));
  elastic::SessionOptions so = alone(store, "changed_test", 0);
  elastic::Session session(so);
  store->set(rdzv::RoundKeys("changed_test", 0).outcome(), "changed: node 1 (h) lost");
  CHECK_THROWS_WITH_AS(session.check(), doctest::Contains("node 1 (h) lost"), MembershipChanged);
  CHECK(session.await_change());
}

TEST_CASE("the sync loads the root's commit on the root too: what on_group changed is undone") {
  // A DDP wrapper built in on_group broadcasts rank 0's parameters, and rank 0 may be a joining
  // worker's: the root of the sync (a survivor) must not keep them.
  auto store = std::make_shared<rdzv::HashStore>(Millis(60'000));
  elastic::SessionOptions so = alone(store, "root_test", 0);
  elastic::Session session(so);
  Counter state;
  state.value = 5;
  state.commit();
  int64_t seen = -1;
  elastic::RunOptions ro;
  ro.on_group = [&](const comm::ProcessGroupPtr&) { state.value = 99; };
  elastic::run(
      session, state, [&](const comm::ProcessGroupPtr&) { seen = state.value; }, ro);
  CHECK(seen == 5);
}

namespace {

// Rank 1 stops calling at step kChangeAt (silent) and leaves only once rank 0 is done; rank 0
// posts that step's all_reduce (posted) and waits in it until the test, playing the launchers,
// announces node 1 lost. What rank 0 saw and ended with: saw_aborted, abort_message, result.
struct SilentPeer {
  static constexpr int kSteps = 5, kChangeAt = 2;
  struct Gone {};  // rank 1's way out of run(): its launcher is gone
  std::shared_ptr<rdzv::TCPStore> store = server();
  const std::string run = "abort_test";
  Latch silent;      // rank 1 stopped calling
  Latch posted;      // rank 0 posted the all_reduce rank 1 will never join
  Latch rank0_done;  // rank 0 finished: rank 1 may go
  Result result;
  bool saw_aborted = false;
  std::string abort_message;
  std::vector<std::exception_ptr> errors = std::vector<std::exception_ptr>(2);

  static std::shared_ptr<rdzv::TCPStore> server() {
    rdzv::TCPStoreOptions server;
    server.is_server = true;
    server.timeout = Millis(60'000);
    return std::make_shared<rdzv::TCPStore>(server);
  }

  // Both ranks to their end; the first rank's error, rethrown.
  void play() {
    std::thread r0(&SilentPeer::worker, this, 0), r1(&SilentPeer::worker, this, 1);
    silent.wait_count(1);
    posted.wait_count(1);
    announce_loss();
    r0.join();
    r1.join();
    for (auto& e : errors) {
      if (e) std::rethrow_exception(e);
    }
  }

  // Rank 0 waits (or is about to) in step kChangeAt's all_reduce. The launchers: node 1 was lost;
  // rank 0 is rank 0 of round 1, alone.
  void announce_loss() {
    rdzv::InPlaceAssignment a{1, 0, 1, 0, 1, 0, 1, "127.0.0.1", 0};
    store->set(rdzv::RoundKeys(run, 0).assign(0), rdzv::encode_in_place(a));
    store->set(rdzv::RoundKeys(run, 0).outcome(), "changed: node 1 (h2) lost");
  }

  elastic::SessionOptions options(int rank) const {
    // A client of its own, as each worker process has (a TCPStore serializes its requests).
    rdzv::TCPStoreOptions client;
    client.port = store->port();
    client.timeout = Millis(60'000);
    elastic::SessionOptions so;
    so.backend = testing::test_backend();
    so.store = std::make_shared<rdzv::TCPStore>(client);
    so.run_id = run;
    so.round = 0;
    so.rank = rank;
    so.world_size = 2;
    so.timeout = Millis(120'000);
    so.outcome_timeout = Millis(30'000);
    so.rejoin_timeout = Millis(30'000);
    return so;
  }

  void worker(int rank) {
    try {
      elastic::Session session(options(rank));
      Counter state;
      elastic::run(session, state, [&](const comm::ProcessGroupPtr& g) { train(session, state, rank, g); });
      if (rank == 0) {
        result.value = state.value;
        result.step = state.step;
        result.round = session.round();
        result.rank = session.rank();
        result.rounds = session.rounds();
      }
    } catch (const Gone&) {
    } catch (...) {
      errors[static_cast<size_t>(rank)] = std::current_exception();
    }
    if (rank == 0) rank0_done.release();
  }

  void train(elastic::Session& session, Counter& state, int rank, const comm::ProcessGroupPtr& g) {
    while (state.step < kSteps) {
      if (rank == 1 && state.step == kChangeAt) {
        silent.arrive();
        rank0_done.wait_open();
        throw Gone{};
      }
      int64_t one = 1;
      comm::WorkPtr w = g->all_reduce(comm::view(&one, 1));
      if (rank == 0 && session.round() == 0 && state.step == kChangeAt) posted.arrive();
      try {
        w->wait();
      } catch (const Aborted& e) {
        saw_aborted = true;
        abort_message = e.what();
        throw;
      }
      state.value += one;
      ++state.step;
      state.commit();
    }
  }
};

}  // namespace

// A peer that simply stops calling (its host cut off: no reset, no FIN) leaves rank 0 waiting in
// an all_reduce; the launchers' "changed: ..." releases it at once (the session's watch aborts
// the group: Aborted, not the 120 s timeout, which would show as this ctest's TIMEOUT), and the
// run goes on in place in a world of one. The launchers' store is a TCPStore here, so the watch
// runs over a connection of its own.
TEST_CASE("a collective waiting on a silent peer is aborted by the announcement, and the run goes on") {
  SilentPeer peers;
  peers.play();
  constexpr int kSteps = SilentPeer::kSteps, kChangeAt = SilentPeer::kChangeAt;
  const Result& result = peers.result;
  CHECK(peers.saw_aborted);
  CHECK_MESSAGE(peers.abort_message.find("round 0 ended: changed: node 1 (h2) lost") != std::string::npos,
                peers.abort_message);
  CHECK(result.value == 2 * kChangeAt + (kSteps - kChangeAt));  // 2 ranks, then 1
  CHECK(result.step == kSteps);
  CHECK(result.round == 1);
  CHECK(result.rank == 0);
  CHECK(result.rounds == 2);
}
