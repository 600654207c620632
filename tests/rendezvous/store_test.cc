// The Store conformance suite (rendezvous/store.h), written once and run against every store:
// HashStore, FileStore, TCPStore and EtcdStore (a real etcd: 1 member, and 3), plain and under
// PrefixStore. The etcd cases are named "<case> (etcd)" and have their own ctest
// (rendezvous_store_test_etcd), Skipped where /usr/bin/etcd is missing.
#include "rendezvous/store.h"

#include <doctest/doctest.h>

#include <algorithm>
#include <atomic>
#include <limits>
#include <numeric>
#include <thread>
#include <vector>

#include "common/error.h"
#include "store_fixtures.h"

using namespace ddp;
using namespace ddp::rdzv;
using namespace ddp::rdzv::testing;

namespace {

// Long enough never to fire on a loaded machine when the key is coming.
constexpr Millis kLong{30'000};
// Short timeouts for keys that never come: the suite must stay fast.
constexpr Millis kShort{50};

bool contains(const std::string& haystack, const std::string& needle) {
  return haystack.find(needle) != std::string::npos;
}

}  // namespace

#define STORE_FIXTURES \
  HashFixture, FileFixture, TcpFixture, Prefixed<HashFixture>, Prefixed<FileFixture>, Prefixed<TcpFixture>
#define ETCD_FIXTURES EtcdFixture, Etcd3Fixture, Prefixed<EtcdFixture>, Prefixed<Etcd3Fixture>

// One conformance case for every store: its body, a function template over the fixture F, runs
// under STORE_FIXTURES as `name` and under ETCD_FIXTURES as `name (etcd)`.
#define STORE_CASE(name, body)                                                                      \
  template <typename F>                                                                             \
  static void body();                                                                               \
  TEST_CASE_TEMPLATE(name, F, STORE_FIXTURES) { body<F>(); }                                        \
  TEST_CASE_TEMPLATE(name " (etcd)" * doctest::skip(!have_etcd()), F, ETCD_FIXTURES) { body<F>(); } \
  template <typename F>                                                                             \
  static void body()

STORE_CASE("set overwrites and get returns bytes exactly", set_and_get) {
  F f;
  auto s = f.main();
  s->set("k", "v1");
  CHECK(s->get_string("k", kLong) == "v1");
  s->set("k", "v2");
  CHECK(s->get_string("k", kLong) == "v2");
  Bytes binary = {0, 1, 2, 255, 0, 10, 13};
  s->set("bin", binary);
  CHECK(s->get("bin", kLong) == binary);
  s->set("empty", Bytes{});
  CHECK(s->get("empty", kLong).empty());
  Bytes big(1 << 20);
  for (size_t i = 0; i < big.size(); ++i) big[i] = static_cast<uint8_t>(i * 7);
  s->set("big", big);
  CHECK(f.client()->get("big", kLong) == big);
}

STORE_CASE("get of a missing key times out naming the key", get_times_out) {
  F f;
  auto s = f.main();
  try {
    s->get("never-set-key", kShort);
    FAIL("get did not time out");
  } catch (const TimeoutError& e) {
    CHECK(contains(e.message(), "never-set-key"));
    CHECK(contains(e.message(), "get"));
    CHECK(contains(e.message(), " ms"));
  }
  // The store timeout is the default for get and wait.
  s->set_timeout(kShort);
  CHECK_THROWS_AS(s->get("never-set-key"), TimeoutError);
  CHECK_THROWS_AS(s->wait({"never-set-key"}), TimeoutError);
  // And the store still works after timeouts.
  s->set("after", "ok");
  CHECK(s->get_string("after", kLong) == "ok");
}

STORE_CASE("get blocks until another client sets the key", get_blocks) {
  F f;
  auto s = f.main();
  auto other = f.client();
  std::atomic<bool> got{false};
  std::thread waiter([&] {
    CHECK(s->get_string("late", kLong) == "here");
    got = true;
  });
  // The set comes only once the get is parked on the missing key (where the store shows it):
  // the get returns by being woken, not by finding the key already there.
  const bool blocked = until_parked(f, 1);
  CHECK_FALSE(got);
  other->set("late", "here");
  waiter.join();
  CHECK(blocked);
  CHECK(got);
}

STORE_CASE("add counts from zero and rejects non-integers", add_counts) {
  F f;
  auto s = f.main();
  CHECK(s->add("n", 5) == 5);
  CHECK(s->add("n", -7) == -2);
  CHECK(s->add("n", 0) == -2);
  CHECK(s->get_string("n", kLong) == "-2");
  CHECK(f.client()->add("n", 3) == 1);
  s->set("text", "hello");
  CHECK_THROWS_AS(s->add("text", 1), InvalidArgument);
  CHECK(s->get_string("text", kLong) == "hello");  // untouched
  s->set("num", "41");
  CHECK(s->add("num", 1) == 42);
  CHECK(s->add("big", int64_t{1} << 40) == int64_t{1} << 40);
}

STORE_CASE("add that would overflow int64 is refused and the store keeps serving", add_overflow) {
  F f;
  auto s = f.main();
  const int64_t max = std::numeric_limits<int64_t>::max();
  const int64_t min = std::numeric_limits<int64_t>::min();
  CHECK(s->add("c", max) == max);
  try {
    s->add("c", 1);
    FAIL("add past INT64_MAX did not throw");
  } catch (const InvalidArgument& e) {
    CHECK(contains(e.message(), "overflow"));
    CHECK(contains(e.message(), "c'"));  // the key (under its prefix for a PrefixStore)
  }
  CHECK(s->get_string("c", kLong) == std::to_string(max));  // unchanged
  CHECK(s->add("c", -1) == max - 1);                        // still served
  CHECK(s->add("d", min) == min);
  CHECK_THROWS_AS(f.client()->add("d", -1), InvalidArgument);
  CHECK(f.client()->add("d", 1) == min + 1);
}

STORE_CASE("compare_set semantics", compare_set_semantics) {
  F f;
  auto s = f.main();
  auto b = Store::to_bytes;
  // Missing key, non-empty expected: nothing stored, expected echoed back (c10d).
  CHECK(s->compare_set("c", b("x"), b("y")) == b("x"));
  CHECK_FALSE(s->check({"c"}));
  // Missing key, empty expected: stored.
  CHECK(s->compare_set("c", {}, b("first")) == b("first"));
  CHECK(s->get_string("c", kLong) == "first");
  // Mismatch: current value returned, unchanged.
  CHECK(s->compare_set("c", b("wrong"), b("second")) == b("first"));
  CHECK(s->get_string("c", kLong) == "first");
  // Match: swapped.
  CHECK(s->compare_set("c", b("first"), b("second")) == b("second"));
  CHECK(f.client()->get_string("c", kLong) == "second");
  // Present with an empty value, empty expected: equal, so stored.
  s->set("e", Bytes{});
  CHECK(s->compare_set("e", {}, b("filled")) == b("filled"));
  CHECK(f.client()->get_string("e", kLong) == "filled");
}

STORE_CASE("first_value: the first caller's value, whoever asks", first_value_wins) {
  F f;
  auto s = f.main();
  auto b = Store::to_bytes;
  CHECK(first_value(*s, "fv", b("mine")) == b("mine"));
  CHECK(first_value(*f.client(), "fv", b("theirs")) == b("mine"));
  CHECK(s->get_string("fv", kLong) == "mine");
  // Callers racing on a missing key all get one value, that of one of them.
  std::vector<std::string> got(4);
  std::vector<std::thread> racers;
  for (size_t i = 0; i < got.size(); ++i) {
    racers.emplace_back(
        [&, i] { got[i] = Store::to_string(first_value(*f.client(), "race", b(std::to_string(i)))); });
  }
  for (auto& t : racers) t.join();
  CHECK(std::count(got.begin(), got.end(), got[0]) == 4);
  CHECK(s->get_string("race", kLong) == got[0]);
}

STORE_CASE("check and wait on several keys", check_and_wait) {
  F f;
  auto s = f.main();
  auto other = f.client();
  CHECK_FALSE(s->check({"w1", "w2", "w3"}));
  s->set("w1", "1");
  CHECK(s->check({"w1"}));
  CHECK_FALSE(s->check({"w1", "w2"}));
  try {
    s->wait({"w1", "w2", "w3"}, kShort);
    FAIL("wait did not time out");
  } catch (const TimeoutError& e) {
    CHECK(contains(e.message(), "w2"));
    CHECK(contains(e.message(), "w3"));
    CHECK_FALSE(contains(e.message(), "'w1'"));  // present keys are not reported missing
  }
  std::thread setter([&] {
    other->set("w3", "3");
    other->set("w2", "2");
  });
  s->wait({"w1", "w2", "w3"}, kLong);
  setter.join();
  CHECK(s->check({"w1", "w2", "w3"}));
  s->wait({}, kShort);  // nothing to wait for
}

STORE_CASE("delete_key and num_keys", delete_key_and_num_keys) {
  F f;
  auto s = f.main();
  int64_t before = s->num_keys();
  s->set("d1", "x");
  s->set("d2", "y");
  s->set("d1", "z");  // overwrite: no new key
  CHECK(s->num_keys() == before + 2);
  CHECK(s->delete_key("d1"));
  CHECK_FALSE(s->delete_key("d1"));
  CHECK_FALSE(s->delete_key("never"));
  CHECK(s->num_keys() == before + 1);
  CHECK_FALSE(s->check({"d1"}));
  CHECK_THROWS_AS(s->get("d1", kShort), TimeoutError);
  CHECK(f.client()->num_keys() == before + 1);
  s->set("d1", "again");
  CHECK(s->get_string("d1", kLong) == "again");
}

STORE_CASE("keys and values beyond the limits are refused", limits) {
  F f;
  auto s = f.main();
  CHECK_THROWS_AS(s->set("", "x"), InvalidArgument);
  CHECK_THROWS_AS(s->set(std::string(kMaxKeySize + 1, 'k'), "x"), InvalidArgument);
  CHECK_THROWS_AS(s->get(std::string(kMaxKeySize + 1, 'k'), kShort), InvalidArgument);
  CHECK_THROWS_AS(s->set("v", Bytes(kMaxValueSize + 1)), InvalidArgument);
  std::string longest(kMaxKeySize - 16, 'k');  // PrefixStore adds its prefix
  s->set(longest, "fits");
  CHECK(s->get_string(longest, kLong) == "fits");
  s->set("still", "works");
  CHECK(f.client()->get_string("still", kLong) == "works");
}

STORE_CASE("threaded add: N threads x M adds is exactly N*M", threaded_add) {
  F f;
  constexpr int kThreads = 8;
  constexpr int kAdds = 200;
  std::vector<std::shared_ptr<Store>> clients;
  for (int t = 0; t < kThreads; ++t) clients.push_back(t % 2 ? f.client() : f.main());
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < kAdds; ++i) clients[t]->add("counter", 1);
    });
  }
  for (auto& t : threads) t.join();
  CHECK(f.main()->add("counter", 0) == kThreads * kAdds);
}

STORE_CASE("tickets: N threads x M tickets are 0..N*M-1, each once; a key's tickets are its own",
           threaded_tickets) {
  F f;
  constexpr int kThreads = 8;
  constexpr int kTickets = 25;
  std::vector<std::shared_ptr<Store>> clients;
  for (int t = 0; t < kThreads; ++t) clients.push_back(t % 2 ? f.client() : f.main());
  std::vector<std::vector<int64_t>> got(kThreads);
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < kTickets; ++i) got[t].push_back(clients[t]->ticket("arrived"));
    });
  }
  for (auto& t : threads) t.join();
  std::vector<int64_t> all;
  for (const auto& g : got) {
    CHECK(std::is_sorted(g.begin(), g.end()));  // one caller's tickets come in its order
    all.insert(all.end(), g.begin(), g.end());
  }
  std::sort(all.begin(), all.end());
  std::vector<int64_t> expected(kThreads * kTickets);
  std::iota(expected.begin(), expected.end(), 0);
  CHECK(all == expected);
  CHECK(f.main()->ticket("arrived") == kThreads * kTickets);
  CHECK(f.client()->ticket("arrived/x") == 0);  // another key, even one under it
  CHECK(f.client()->ticket("arrive") == 0);
}

STORE_CASE("tickets(key) counts the tickets taken so far and writes nothing", ticket_count) {
  F f;
  const int64_t keys_before = f.main()->num_keys();
  CHECK(f.client()->tickets("arrived") == 0);
  CHECK_FALSE(f.main()->check({"arrived"}));
  CHECK(f.main()->num_keys() == keys_before);  // counting created nothing
  for (int i = 0; i < 5; ++i) CHECK(f.client()->ticket("arrived") == i);
  CHECK(f.main()->tickets("arrived") == 5);
  CHECK(f.client()->tickets("arrived") == 5);
  CHECK(f.main()->ticket("arrived") == 5);
  CHECK(f.client()->tickets("arrived") == 6);
  CHECK(f.client()->tickets("arrive") == 0);  // another key's tickets are not these
  CHECK(f.client()->ticket("arrived/x") == 0);
  CHECK(f.client()->tickets("arrived") == 6);
}

STORE_CASE("get_present reads what exists without waiting; multi_get waits for the rest", multi_get) {
  F f;
  std::vector<std::string> keys;
  for (int i = 0; i < 150; ++i) keys.push_back("reg/" + std::to_string(i));  // over etcd's txn batch
  for (int i = 0; i < 150; i += 2) f.main()->set(keys[i], "v" + std::to_string(i));
  const auto present = f.client()->get_present(keys);
  REQUIRE(present.size() == keys.size());
  for (int i = 0; i < 150; ++i) {
    CAPTURE(i);
    CHECK(present[i].has_value() == (i % 2 == 0));
    if (present[i]) CHECK(Store::to_string(*present[i]) == "v" + std::to_string(i));
  }
  CHECK(f.client()->get_present({}).empty());
  CHECK_THROWS_AS(f.client()->multi_get(keys, Millis(50)), TimeoutError);
  std::thread writer([&] {
    auto c = f.client();
    for (int i = 1; i < 150; i += 2) c->set(keys[i], "v" + std::to_string(i));
  });
  const auto all = f.client()->multi_get(keys, kLong);
  writer.join();
  REQUIRE(all.size() == keys.size());
  for (int i = 0; i < 150; ++i) CHECK(Store::to_string(all[i]) == "v" + std::to_string(i));
}

STORE_CASE("many waiters on one key are all woken", many_waiters) {
  F f;
  constexpr int kWaiters = 6;
  std::atomic<int> woken{0};
  std::vector<std::thread> threads;
  for (int i = 0; i < kWaiters; ++i) {
    threads.emplace_back([&] {
      auto c = f.client();
      c->wait({"go"}, kLong);
      if (c->get_string("go", kLong) == "now") ++woken;
    });
  }
  const bool all_parked = until_parked(f, kWaiters);  // every waiter is blocked before the set
  f.main()->set("go", "now");
  for (auto& t : threads) t.join();
  CHECK(all_parked);
  CHECK(woken == kWaiters);
}

STORE_CASE("clone: the same data through a handle of its own, whose waits interrupt() ends", clone) {
  F f;
  auto s = f.main();
  std::unique_ptr<Store> c = s->clone();
  REQUIRE(c != nullptr);
  CHECK(c->timeout() == s->timeout());
  s->set("before", "1");
  CHECK(c->get_string("before", kLong) == "1");
  c->set("from-clone", "2");
  CHECK(s->get_string("from-clone", kLong) == "2");
  // A wait on the clone ends at interrupt(), with a NetworkError; the original still works.
  std::atomic<bool> ended{false};
  std::string why;
  std::thread waiter([&] {
    try {
      c->wait({"never"}, kLong);
    } catch (const NetworkError& e) {
      why = e.message();
    } catch (const std::exception& e) {
      why = std::string("not a NetworkError: ") + e.what();
    }
    ended = true;
  });
  CHECK(until_parked(f, 1));
  c->interrupt();
  waiter.join();
  CHECK(ended);
  CHECK(contains(why, "interrupt"));
  CHECK_THROWS_AS(c->get("never", kLong), NetworkError);  // and every later one
  s->set("after", "3");
  CHECK(s->get_string("after", kLong) == "3");
}
