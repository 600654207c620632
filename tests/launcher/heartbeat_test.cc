// Heartbeats between launchers over an in-memory store: a peer that stops beating is lost and
// named after interval x max_attempt, a live one never is, and an unreachable store is reported.
#include "launcher/heartbeat.h"

#include <doctest/doctest.h>

#include <atomic>
#include <thread>

#include "common/error.h"
#include "rendezvous/hash_store.h"
#include "rendezvous/prefix_store.h"

using namespace ddp;
using namespace ddp::launcher;

namespace {

HeartbeatOptions opts(std::shared_ptr<rdzv::Store> store, const std::string& id) {
  HeartbeatOptions o;
  o.run_id = "job";
  o.id = id;
  o.interval = Millis(20);
  o.max_attempt = 3;
  o.open_store = [store] { return std::make_unique<rdzv::PrefixStore>("", store); };
  return o;
}

bool eventually(const std::function<bool()>& cond) {
  const auto deadline = Clock::now() + std::chrono::seconds(30);
  while (Clock::now() < deadline) {
    if (cond()) return true;
    std::this_thread::sleep_for(Millis(5));
  }
  return cond();
}

}  // namespace

TEST_CASE("a peer that stops beating is lost and named; a live one is not") {
  auto store = std::make_shared<rdzv::HashStore>();
  Heartbeat a(opts(store, "a"));
  auto b = std::make_unique<Heartbeat>(opts(store, "b"));
  auto c = std::make_unique<Heartbeat>(opts(store, "c"));
  a.watch({{"b", "node 1 (hb)"}, {"c", "node 2 (hc)"}, {"a", "node 0 (self, never watched)"}});
  CHECK(a.bound() == Millis(60));
  // Both beat: a's counters of them keep moving (several bounds pass with nothing lost).
  rdzv::PrefixStore view("", store);  // the keys as the heartbeats see them
  REQUIRE(eventually([&] { return view.add(heartbeat_key("job", "b"), 0) > 10; }));
  CHECK(a.lost().empty());
  c.reset();  // node 2's launcher is gone
  REQUIRE(eventually([&] { return !a.lost().empty(); }));
  REQUIRE(a.lost().size() == 1);
  CHECK(a.lost()[0].name == "node 2 (hc)");
  CHECK_FALSE(a.store_lost().has_value());
  CHECK_FALSE(a.all_beat_since(Clock::now()));  // not before a beat was seen after it
  a.watch({{"b", "node 0 (hb)"}});              // a new round: earlier losses are forgotten
  CHECK(a.lost().empty());
  const auto since = Clock::now();
  CHECK(eventually([&] { return a.all_beat_since(since); }));  // b beats on
}

TEST_CASE("on_loss is called on the heartbeat's thread when a peer, or the store, is found lost") {
  auto store = std::make_shared<rdzv::HashStore>();
  std::atomic<int> calls{0};
  auto o = opts(store, "a");
  o.on_loss = [&] { ++calls; };
  Heartbeat a(o);
  a.watch({{"ghost", "node 3 (gone)"}});
  REQUIRE(eventually([&] { return calls.load() == 1; }));
  CHECK(a.lost().size() == 1);
  auto gone = opts(store, "b");
  gone.open_store = []() -> std::unique_ptr<rdzv::Store> { DDP_THROW(NetworkError, "store at h:1 is gone"); };
  std::atomic<int> store_calls{0};
  gone.on_loss = [&] { ++store_calls; };
  Heartbeat b(gone);
  REQUIRE(eventually([&] { return store_calls.load() == 1; }));
  CHECK(b.store_lost().has_value());
  std::this_thread::sleep_for(Millis(100));  // several more bounds: each loss is told once
  CHECK(calls.load() == 1);
  CHECK(store_calls.load() == 1);
}

TEST_CASE("a peer that never beat at all is lost too") {
  auto store = std::make_shared<rdzv::HashStore>();
  Heartbeat a(opts(store, "a"));
  a.watch({{"ghost", "node 3 (gone)"}});
  REQUIRE(eventually([&] { return !a.lost().empty(); }));
  CHECK(a.lost()[0].name == "node 3 (gone)");
}

TEST_CASE("a store that cannot be reached for the whole bound is reported with the error") {
  auto o = opts(std::make_shared<rdzv::HashStore>(), "a");
  o.open_store = []() -> std::unique_ptr<rdzv::Store> { DDP_THROW(NetworkError, "store at h:1 is gone"); };
  Heartbeat a(o);
  REQUIRE(eventually([&] { return a.store_lost().has_value(); }));
  CHECK(a.store_lost()->find("store at h:1 is gone") != std::string::npos);
}
