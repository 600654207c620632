// StoreHeartbeat: launchers as threads over the in-memory store (each with its own counted
// connection). A node that stops beating is lost and named by every other within the bound, the
// round's checker included; a live one never is; a store that cannot be reached is reported with
// what was tried and with whom; and the cost is O(N): each launcher but the checker makes two
// requests per beat (the beat, the report), the checker O(N).
#include "launcher/heartbeat.h"

#include <doctest/doctest.h>

#include <atomic>
#include <thread>

#include "common/error.h"
#include "rendezvous/hash_store.h"
#include "rendezvous/job_keys.h"

using namespace ddp;
using namespace ddp::launcher;

namespace {

// A 2 s bound: a live launcher is named lost only after bound - interval/2 of silence
// (launcher/heartbeat.h), so a thread a loaded 2-core machine (ctest -j, sanitizer builds beside)
// leaves unscheduled for up to 1.9 s is still not lost, where a 1 s bound left 0.9 s.
constexpr Millis kInterval{200};
constexpr int kMaxAttempt = 10;
constexpr Millis kBound = kInterval * kMaxAttempt;
// What a detection is asserted within: the contract's bound plus one interval (the checker names a
// node by the bound of its last beat, the others one interval later), plus this slack for the
// same machine's late wake-ups (the heartbeat threads' and this test's poll). A regression of the
// bound by more than the slack fails.
constexpr Millis kSlack{2'000};
constexpr Millis kDetected = kBound + kInterval + kSlack;
// How long a wait that asserts no timing (beats counted, a condition reached) may take.
constexpr Millis kPatience{30'000};

// A connection to the shared store that counts its requests and can be made to fail (a store
// that stopped answering: its requests fail, and so do new connections).
class CountingStore final : public rdzv::Store {
 public:
  struct Shared {
    std::atomic<int64_t> requests{0};
    std::atomic<bool> fail{false};
  };
  CountingStore(std::shared_ptr<rdzv::Store> base, std::shared_ptr<Shared> shared)
      : base_(std::move(base)), s_(std::move(shared)) {}

 protected:
  void do_set(const std::string& k, const rdzv::Bytes& v) override { count(), base_->set(k, v); }
  rdzv::Bytes do_get(const std::string& k, Millis t) override { return count(), base_->get(k, t); }
  int64_t do_add(const std::string& k, int64_t d) override { return count(), base_->add(k, d); }
  rdzv::Bytes do_compare_set(const std::string& k, const rdzv::Bytes& e, const rdzv::Bytes& d) override {
    return count(), base_->compare_set(k, e, d);
  }
  bool do_check(const std::vector<std::string>& k) override { return count(), base_->check(k); }
  void do_wait(const std::vector<std::string>& k, Millis t) override { count(), base_->wait(k, t); }
  bool do_delete_key(const std::string& k) override { return count(), base_->delete_key(k); }
  int64_t do_num_keys() override { return count(), base_->num_keys(); }

 private:
  int count() {
    if (s_->fail)
      DDP_THROW(NetworkError, "store add: lost the connection to the store at h:1: reset by peer");
    return static_cast<int>(++s_->requests);
  }
  std::shared_ptr<rdzv::Store> base_;
  std::shared_ptr<Shared> s_;
};

// One launcher: its heartbeat and its connection's counters.
struct Launcher {
  std::string id;
  std::shared_ptr<CountingStore::Shared> counts = std::make_shared<CountingStore::Shared>();
  std::atomic<int> losses{0};
  std::unique_ptr<StoreHeartbeat> hb;
};

std::vector<std::unique_ptr<Launcher>> start(const std::shared_ptr<rdzv::Store>& store, int n) {
  std::vector<std::unique_ptr<Launcher>> out;
  for (int i = 0; i < n; ++i) {
    auto l = std::make_unique<Launcher>();
    l->id = "id" + std::to_string(i);
    StoreHeartbeatOptions o;
    o.run_id = "job";
    o.id = l->id;
    o.interval = kInterval;
    o.max_attempt = kMaxAttempt;
    o.store_name = "the rendezvous store at h:1";
    o.open_store = [store, c = l->counts] {
      if (c->fail) DDP_THROW(NetworkError, "connect to h:1: Connection refused");
      return std::make_unique<CountingStore>(store, c);
    };
    o.on_loss = [p = l.get()] { ++p->losses; };
    l->hb = std::make_unique<StoreHeartbeat>(std::move(o));
    out.push_back(std::move(l));
  }
  return out;
}

std::string name_of(int rank) { return "node " + std::to_string(rank) + " (h" + std::to_string(rank) + ")"; }

// Round `round` of these launchers, node ranks in this order; "" ids are nodes without liveness.
LivenessRound round_of(int round, const std::vector<std::string>& ids, int node_rank) {
  LivenessRound r{round, node_rank, {}};
  for (size_t i = 0; i < ids.size(); ++i) r.nodes.push_back({ids[i], name_of(static_cast<int>(i))});
  return r;
}

void watch_all(std::vector<std::unique_ptr<Launcher>>& ls, int round, const std::vector<int>& members) {
  std::vector<std::string> ids;
  for (int m : members) ids.push_back(ls[m]->id);
  for (size_t rank = 0; rank < members.size(); ++rank)
    ls[members[rank]]->hb->watch(round_of(round, ids, static_cast<int>(rank)));
}

bool eventually(const std::function<bool()>& cond, Millis within = kPatience) {
  const auto deadline = Clock::now() + within;
  while (Clock::now() < deadline) {
    if (cond()) return true;
    std::this_thread::sleep_for(Millis(5));
  }
  return cond();
}

int64_t beats(rdzv::Store& store, const Launcher& l) {
  return store.add(rdzv::JobKeys("job").heartbeat(l.id), 0);
}

// Kills members[victim] and checks that every other member names it, each within kDetected.
void check_found_by_all(std::vector<std::unique_ptr<Launcher>>& ls, const std::vector<int>& members,
                        int victim) {
  const std::string name = name_of(victim);
  ls[members[victim]]->hb.reset();  // its launcher is gone
  const auto killed = Clock::now();
  for (size_t rank = 0; rank < members.size(); ++rank) {
    if (static_cast<int>(rank) == victim) continue;
    auto& l = *ls[members[rank]];
    CAPTURE(rank);
    REQUIRE(eventually([&] { return !l.hb->lost().empty(); }));
    CHECK(Clock::now() - killed <= kDetected);
    REQUIRE(l.hb->lost().size() == 1);
    CHECK(l.hb->lost()[0].name == name);
    CHECK(l.losses.load() >= 1);
    CHECK_FALSE(l.hb->store_lost().has_value());
  }
}

}  // namespace

TEST_CASE(
    "live launchers are never lost; a non-checker that stops is named by every other within the bound") {
  auto store = std::make_shared<rdzv::HashStore>();
  auto ls = start(store, 4);
  watch_all(ls, 0, {0, 1, 2, 3});
  CHECK(ls[0]->hb->bound() == kBound);
  // Two bounds with every launcher beating: nothing lost anywhere.
  REQUIRE(eventually([&] { return beats(*store, *ls[3]) > 2 * kMaxAttempt; }));
  for (auto& l : ls) CHECK(l->hb->lost().empty());
  check_found_by_all(ls, {0, 1, 2, 3}, 2);
  CHECK(ls[1]->losses.load() == 1);  // each loss is told once
}

TEST_CASE("a lost checker (the round's node 0) is named by every other launcher") {
  auto store = std::make_shared<rdzv::HashStore>();
  auto ls = start(store, 4);
  watch_all(ls, 0, {0, 1, 2, 3});
  REQUIRE(eventually([&] { return beats(*store, *ls[1]) > 2 * kMaxAttempt; }));
  check_found_by_all(ls, {0, 1, 2, 3}, 0);
}

TEST_CASE("a new round: another checker, earlier losses forgotten, every node seen beating after a time") {
  auto store = std::make_shared<rdzv::HashStore>();
  auto ls = start(store, 3);
  const auto watched = Clock::now();
  ls[0]->hb->watch(round_of(0, {"id0", "id1", "ghost"}, 0));  // the checker
  ls[1]->hb->watch(round_of(0, {"id0", "id1", "ghost"}, 1));
  REQUIRE(eventually([&] { return !ls[0]->hb->lost().empty() && !ls[1]->hb->lost().empty(); }));
  CHECK(Clock::now() - watched <= kDetected);
  CHECK(ls[1]->hb->lost()[0].name == "node 2 (h2)");     // never beat at all, found through the report
  CHECK_FALSE(ls[1]->hb->all_beat_since(Clock::now()));  // not before a beat was seen after it
  // Round 1: launcher 2 joins as node 0 (the checker), then 1, then 0.
  watch_all(ls, 1, {2, 1, 0});
  for (auto& l : ls) CHECK(l->hb->lost().empty());
  const auto since = Clock::now();
  for (auto& l : ls) CHECK(eventually([&] { return l->hb->all_beat_since(since); }));
  for (auto& l : ls) CHECK(l->hb->lost().empty());
}

TEST_CASE("nodes without liveness (no id) are never watched; a round of one watches no one") {
  auto store = std::make_shared<rdzv::HashStore>();
  auto ls = start(store, 2);
  ls[0]->hb->watch(round_of(0, {"", "id0", "id1"}, 1));  // node 1 is the first with an id
  ls[1]->hb->watch(round_of(0, {"", "id0", "id1"}, 2));
  const auto since = Clock::now();
  for (auto& l : ls) CHECK(eventually([&] { return l->hb->all_beat_since(since); }));
  auto alone = start(std::make_shared<rdzv::HashStore>(), 1);
  alone[0]->hb->watch(round_of(0, {"id0"}, 0));
  CHECK(alone[0]->hb->all_beat_since(Clock::now()));
  for (auto& l : ls) CHECK(l->hb->lost().empty());
}

TEST_CASE("O(N): a constant number of requests per beat at each launcher but the checker, O(N) at it") {
  for (int n : {4, 16}) {
    CAPTURE(n);
    auto store = std::make_shared<rdzv::HashStore>();
    auto ls = start(store, n);
    std::vector<int> members;
    for (int i = 0; i < n; ++i) members.push_back(i);
    watch_all(ls, 0, members);
    REQUIRE(eventually([&] { return beats(*store, *ls[n - 1]) > 2; }));
    std::vector<int64_t> r0, b0;
    for (auto& l : ls) r0.push_back(l->counts->requests), b0.push_back(beats(*store, *l));
    REQUIRE(eventually([&] { return beats(*store, *ls[n - 1]) > b0[n - 1] + 10; }));
    for (int i = 0; i < n; ++i) {
      CAPTURE(i);
      const int64_t requests = ls[i]->counts->requests - r0[i];
      const int64_t periods = beats(*store, *ls[i]) - b0[i] + 1;  // + one under way at either end
      // A beat per interval. The checker ticks twice per interval: at each tick it reads the n - 1
      // other counters and writes the report; any other launcher wakes once, beats and reads the
      // report. A late tick (a loaded host) can put two wakes between two beats: twice allowed.
      const int64_t per_beat = i == 0 ? 1 + 2 * n : 2;
      CHECK(requests <= 2 * per_beat * periods);
      if (i == 0) CHECK(requests >= (n - 1) * (periods - 2));  // O(N) at the checker
    }
    for (auto& l : ls) CHECK(l->hb->lost().empty());
  }
}

TEST_CASE(
    "before its first round a launcher waits out join_patience for the store; once watching, a bound from "
    "then") {
  StoreHeartbeatOptions o;
  o.run_id = "job";
  o.id = "a";
  o.interval = Millis(20);
  o.max_attempt = 3;
  o.join_patience = Millis(600'000);  // far past this test
  o.open_store = []() -> std::unique_ptr<rdzv::Store> {
    DDP_THROW(NetworkError, "connect to 10.0.0.1:29400: Connection refused");
  };
  StoreHeartbeat a(o);
  std::this_thread::sleep_for(o.interval * o.max_attempt * 3);  // three bounds without an answer
  CHECK_FALSE(a.store_lost());
  const auto watched = Clock::now();
  a.watch(LivenessRound{});  // a round: the bound now applies, counted from this first watch
  Clock::time_point seen{};
  REQUIRE(eventually([&] {
    seen = Clock::now();
    return a.store_lost().has_value();
  }));
  CHECK(seen - watched >= a.bound());  // not at once, though the last answer is long past
  CHECK(seen - watched <= a.bound() + o.interval + kSlack);
  CHECK(a.store_lost()->find("keep_alive_interval x keep_alive_max_attempt") != std::string::npos);
}

TEST_CASE("a store that cannot be reached for the whole bound is reported: what was tried, with whom") {
  SUBCASE("never reached") {
    // A 60 ms bound: nothing here can answer, so a late thread can only report late (within the
    // slack), never wrongly; a short bound keeps "several more bounds" short.
    StoreHeartbeatOptions o;
    o.run_id = "job";
    o.id = "a";
    o.interval = Millis(20);
    o.max_attempt = 3;
    o.store_name = "the rendezvous store at 10.0.0.1:29400";
    o.open_store = []() -> std::unique_ptr<rdzv::Store> {
      DDP_THROW(NetworkError, "connect to 10.0.0.1:29400: Connection refused");
    };
    std::atomic<int> calls{0};
    o.on_loss = [&] { ++calls; };
    const auto started = Clock::now();
    StoreHeartbeat a(o);
    REQUIRE(eventually([&] { return a.store_lost().has_value(); }));
    CHECK(Clock::now() - started <= o.interval * o.max_attempt + o.interval + kSlack);
    const std::string why = *a.store_lost();
    CHECK(why.find("heartbeat to the rendezvous store at 10.0.0.1:29400") != std::string::npos);
    CHECK(why.find("could not connect: connect to 10.0.0.1:29400: Connection refused") != std::string::npos);
    CHECK(why.find("not connected yet") == std::string::npos);
    std::this_thread::sleep_for(Millis(100));  // several more bounds: told once
    CHECK(calls.load() == 1);
  }
  SUBCASE("reached, then silent") {
    auto store = std::make_shared<rdzv::HashStore>();
    auto ls = start(store, 2);
    watch_all(ls, 0, {0, 1});
    REQUIRE(eventually([&] { return beats(*store, *ls[1]) > 2; }));
    ls[1]->counts->fail = true;
    const auto failed = Clock::now();
    REQUIRE(eventually([&] { return ls[1]->hb->store_lost().has_value(); }));
    CHECK(Clock::now() - failed <= kDetected);  // no answer since a moment before `failed`
    const std::string why = *ls[1]->hb->store_lost();
    CHECK(why.find("heartbeat to the rendezvous store at h:1") != std::string::npos);
    CHECK(why.find("could not connect: connect to h:1: Connection refused") != std::string::npos);
    CHECK(ls[1]->losses.load() == 1);
  }
}
