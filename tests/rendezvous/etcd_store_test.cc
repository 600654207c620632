// EtcdStore beyond the conformance suite (store_test.cc runs that on etcd): a 3-member cluster
// losing one member mid-use (calls and blocked waits go on through fail-over) and then a
// second (calls fail within their deadline naming the members, never hang); leases and
// prefix watches for liveness (a lease that is not kept alive deletes its key, and a watcher
// sees the DELETE); interrupt(); etcd's own limits; an add whose transaction is lost in flight
// (tests/rendezvous/etcd_fault_proxy.h) applied exactly once; a wait in slices costing one
// watch; compare_set and ticket in one transaction each (ticket ranked right when sent again).
// Each test starts the etcd it needs.
#include "rendezvous/etcd_store.h"

#include <doctest/doctest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <functional>
#include <future>
#include <numeric>
#include <optional>
#include <thread>
#include <vector>

#include "common/error.h"
#include "etcd_cluster.h"
#include "etcd_fault_proxy.h"
#include "rendezvous/prefix_store.h"

using namespace ddp;
using namespace ddp::rdzv;
using namespace ddp::rdzv::testing;

namespace {

constexpr Millis kLong{30'000};

bool contains(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

std::shared_ptr<EtcdStore> store_on(const EtcdCluster& etcd, const std::string& prefix,
                                    Millis request_timeout) {
  EtcdStoreOptions o;
  o.client = etcd.client_options();
  o.client.request_timeout = request_timeout;
  o.prefix = prefix;
  o.timeout = kLong;
  return std::make_shared<EtcdStore>(o);
}

}  // namespace

TEST_CASE("3 members: one SIGKILLed mid-use, then a second; fail-over, then errors within the deadline" *
          doctest::skip(!have_etcd())) {
  EtcdClusterOptions co;
  co.members = 3;
  EtcdCluster etcd(co);
  auto s = store_on(etcd, "/ddp/failover/", Millis(15'000));
  auto other = store_on(etcd, "/ddp/failover/", Millis(15'000));
  s->set("before", "1");
  CHECK(s->add("n", 5) == 5);

  // A get blocked on a watch served by the member about to die: it must see the key anyway.
  const size_t victim = s->client().current_member();
  std::atomic<bool> got{false};
  std::thread waiter([&] {
    CHECK(s->get_string("late", kLong) == "here");
    got = true;
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(300));  // the watch is open by now
  etcd.kill(static_cast<int>(victim));
  CHECK(other->add("n", 1) == 6);
  other->set("late", "here");
  waiter.join();
  CHECK(got);

  // Everything works on the two members left, from both clients, whichever member they used.
  for (int i = 0; i < 20; ++i) CHECK(s->add("n", 1) == 7 + i);
  CHECK(s->compare_set("cs", {}, Store::to_bytes("x")) == Store::to_bytes("x"));
  CHECK(other->get_string("before", kLong) == "1");
  s->wait({"before", "late", "cs"}, kLong);
  CHECK(s->delete_key("before"));
  CHECK(other->num_keys() == 3);  // n, late, cs

  // Quorum lost: every call fails within its deadline, naming each member; nothing hangs. A
  // get blocked on a watch when it goes learns it too (the member cancels a watch without a
  // leader), rather than timing out as if the key were merely missing.
  auto lonely = store_on(etcd, "/ddp/failover/", Millis(2'000));
  std::string blocked_error;
  std::thread blocked([&] {
    try {
      lonely->get("never", Millis(8'000));  // the member notices in 1-3 election timeouts
    } catch (const Error& e) {
      blocked_error =
          std::string(dynamic_cast<const NetworkError*>(&e) ? "NetworkError: " : "other: ") + e.message();
    }
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  const int second = (static_cast<int>(victim) + 1) % 3;
  etcd.kill(second);
  blocked.join();
  MESSAGE(blocked_error);  // shown with -s: what a user would read
  CHECK(blocked_error.starts_with("NetworkError: "));
  CHECK(contains(blocked_error, "no leader"));
  for (auto call : std::vector<std::function<void()>>{
           [&] { lonely->set("k", "v"); }, [&] { lonely->get("n", Millis(2'000)); },
           [&] { lonely->add("n", 1); }, [&] { lonely->wait({"never"}, Millis(2'000)); }}) {
    const Deadline d(Millis(8'000));
    try {
      call();
      FAIL("no error without quorum");
    } catch (const NetworkError& e) {
      MESSAGE(e.message());
      CHECK(!d.expired());
      for (const auto& endpoint : etcd.endpoints()) CHECK(contains(e.message(), endpoint));
    }
  }
}

TEST_CASE(
    "liveness: a key under a lease goes when the lease is not kept alive, and a prefix watch sees it go" *
    doctest::skip(!have_etcd())) {
  EtcdCluster& etcd = shared_etcd(1);
  auto s = store_on(etcd, unique_prefix("liveness"), Millis(10'000));
  const auto lease = s->client().grant_lease(1);
  s->set_with_lease("members/a", Store::to_bytes("host-a"), lease.id);
  s->set("members/b", "host-b");  // no lease: stays
  const EtcdSnapshot snap = s->read_prefix("members/");
  REQUIRE(snap.entries.size() == 2);
  CHECK(snap.entries[0].first == "members/a");
  CHECK(Store::to_string(snap.entries[0].second) == "host-a");
  auto watch = s->watch_prefix("members/", snap.revision + 1);

  // Kept alive past its TTL: still there.
  for (int i = 0; i < 4; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(400));
    CHECK(s->client().keep_alive(lease.id) > 0);
  }
  CHECK(s->check({"members/a"}));
  s->set("members/c", "host-c");

  // Left alone: etcd deletes the key within the TTL (plus its own check interval).
  std::vector<etcd::Event> seen;
  const Deadline d(Millis(10'000));
  while (seen.size() < 2 && !d.expired()) {
    for (auto& e : watch->next(d).events) seen.push_back(e);
  }
  REQUIRE(seen.size() == 2);
  CHECK(seen[0].type == etcd::Event::Type::kPut);
  CHECK(seen[0].kv.key == "members/c");
  CHECK(seen[1].type == etcd::Event::Type::kDelete);
  CHECK(seen[1].kv.key == "members/a");
  CHECK_FALSE(s->check({"members/a"}));
  CHECK(s->check({"members/b", "members/c"}));
  CHECK(s->client().keep_alive(lease.id) == 0);
}

TEST_CASE("first_ticket_revision: 0 before any ticket, then the first ticket's, whatever follows" *
          doctest::skip(!have_etcd())) {
  auto s = store_on(shared_etcd(1), unique_prefix("first_ticket"), Millis(10'000));
  CHECK(s->first_ticket_revision("arrived") == 0);
  s->set("before", "x");
  const int64_t before = s->read_prefix("before").revision;
  s->ticket("arrived");
  const int64_t first = s->first_ticket_revision("arrived");
  CHECK(first > before);
  for (int i = 0; i < 3; ++i) s->ticket("arrived");
  s->ticket("arrived/x");  // another key's tickets are not these
  CHECK(s->first_ticket_revision("arrived") == first);
  CHECK(s->first_ticket_revision("arrived/x") > first);
}

TEST_CASE("a prefix watch of deletions only: puts send nothing, a deletion arrives" *
          doctest::skip(!have_etcd())) {
  auto s = store_on(shared_etcd(1), unique_prefix("noput"), Millis(10'000));
  s->set("members/a", "host-a");
  const int64_t from = s->read_prefix("members/").revision + 1;  // every change after the first put
  for (int i = 0; i < 5; ++i) s->set("members/p" + std::to_string(i), "x");
  CHECK(s->delete_key("members/a"));
  auto watch = s->watch_prefix("members/", from, /*deletions_only=*/true);
  std::vector<etcd::Event> seen;
  const Deadline d(Millis(10'000));
  while (seen.empty() && !d.expired()) {
    for (auto& e : watch->next(d).events) seen.push_back(e);
  }
  REQUIRE(seen.size() == 1);  // the five puts came first: with them, the deletion would be sixth
  CHECK(seen[0].type == etcd::Event::Type::kDelete);
  CHECK(seen[0].kv.key == "members/a");
}

TEST_CASE("interrupt ends a blocked get at once, and later ones; other calls go on" *
          doctest::skip(!have_etcd())) {
  auto s = store_on(shared_etcd(1), unique_prefix("interrupt"), Millis(10'000));
  std::thread interrupter([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
    s->interrupt();
  });
  const Deadline d(kLong);
  CHECK_THROWS_AS(s->get("never", kLong), NetworkError);
  interrupter.join();
  CHECK(d.elapsed() < Millis(10'000));
  CHECK_THROWS_AS(s->wait({"never"}, kLong), NetworkError);
  s->set("k", "v");
  CHECK(s->get_string("k") == "v");  // present: no wait, no error
}

TEST_CASE("stores under different prefixes share a cluster without seeing each other" *
          doctest::skip(!have_etcd())) {
  EtcdCluster& etcd = shared_etcd(1);
  auto a = store_on(etcd, unique_prefix("a"), Millis(10'000));
  EtcdStore b(a->shared_client(), unique_prefix("b"));  // one connection, another run
  a->set("k", "from a");
  b.set("k", "from b");
  CHECK(a->get_string("k") == "from a");
  CHECK(b.get_string("k") == "from b");
  CHECK(a->num_keys() == 1);
  PrefixStore round(std::string("round/1"), a);
  round.set("x", "y");
  CHECK(a->get_string("round/1/x") == "y");
  CHECK_THROWS_AS(EtcdStore(a->shared_client(), ""), InvalidArgument);
}

TEST_CASE("a value beyond etcd's request limit is a StoreError with etcd's message" *
          doctest::skip(!have_etcd())) {
  auto s = store_on(shared_etcd(1), unique_prefix("limit"), Millis(10'000));
  try {
    s->set("big", Bytes(1800 << 10, 7));  // over etcd's 1.5 MiB, under its gRPC limit of 2 MiB
    FAIL("1.8 MiB accepted");
  } catch (const StoreError& e) {
    INFO(e.message());
    CHECK(contains(e.message(), "refused it: etcdserver: request is too large"));
  }
  s->set("small", "fits");
  CHECK(s->get_string("small") == "fits");
}

namespace {

// A store reaching the shared member through `proxy` only; its adds lose their transaction there.
std::shared_ptr<EtcdStore> store_via(const FaultProxy& proxy, const std::string& prefix,
                                     Millis request_timeout = Millis(10'000)) {
  EtcdStoreOptions o;
  o.client.endpoints = {proxy.endpoint()};
  o.client.request_timeout = request_timeout;
  o.prefix = prefix;
  o.timeout = kLong;
  return std::make_shared<EtcdStore>(o);
}

// A first ticket taken directly, then a store whose ticket transactions etcd applies but whose
// answers are lost, etcd then answering nothing for `hold` (FaultProxy).
struct LostTicketAnswer {
  LostTicketAnswer(const std::string& name, Millis hold)
      : etcd(shared_etcd(1)),
        prefix(unique_prefix(name)),
        direct(store_on(etcd, prefix, Millis(10'000))),
        first(direct->ticket("arrived")),
        proxy(net::parse_endpoint(etcd.endpoint(0)), "POST /v3/kv/txn", FaultProxy::Fault::kDropAnswer, true,
              hold),
        s(store_via(proxy, prefix, Millis(2'000))) {}
  EtcdCluster& etcd;
  std::string prefix;
  std::shared_ptr<EtcdStore> direct;
  int64_t first;
  FaultProxy proxy;
  std::shared_ptr<EtcdStore> s;
};

}  // namespace

TEST_CASE("add whose transaction is lost in flight is applied exactly once" * doctest::skip(!have_etcd())) {
  EtcdCluster& etcd = shared_etcd(1);
  const net::Endpoint member = net::parse_endpoint(etcd.endpoint(0));
  // Each loss on a fresh connection (an error the add must settle by its marker) and on a re-used
  // one (libcurl sends the request again by itself: the add's transaction then fails on the
  // revision its first send changed, and finds its marker).
  for (const bool fresh : {true, false}) {
    for (const auto fault : {FaultProxy::Fault::kDropAnswer, FaultProxy::Fault::kDropRequest}) {
      const bool applied = fault == FaultProxy::Fault::kDropAnswer;
      CAPTURE(applied);
      CAPTURE(fresh);
      const std::string prefix = unique_prefix(applied ? "lost-answer" : "lost-request");
      auto direct = store_on(etcd, prefix, Millis(10'000));
      CHECK(direct->add("n", 1) == 1);
      FaultProxy proxy(member, "POST /v3/kv/txn", fault, fresh);
      auto s = store_via(proxy, prefix);
      CHECK(s->add("n", 1) == 2);  // the lost try counted once, or tried again once
      CHECK(proxy.fired());
      CHECK(direct->get_string("n") == "2");
      CHECK(direct->add("n", 3) == 5);
      CHECK(direct->num_keys() == 1);  // the add's marker is not a key of the store
    }
  }
}

TEST_CASE("a ticket whose transaction is lost in flight counts once" * doctest::skip(!have_etcd())) {
  EtcdCluster& etcd = shared_etcd(1);
  const net::Endpoint member = net::parse_endpoint(etcd.endpoint(0));
  for (const bool fresh : {true, false}) {
    for (const auto fault : {FaultProxy::Fault::kDropAnswer, FaultProxy::Fault::kDropRequest}) {
      CAPTURE(fault == FaultProxy::Fault::kDropAnswer);
      CAPTURE(fresh);
      const std::string prefix = unique_prefix("lost-ticket");
      auto direct = store_on(etcd, prefix, Millis(10'000));
      CHECK(direct->ticket("arrived") == 0);
      FaultProxy proxy(member, "POST /v3/kv/txn", fault, fresh);
      auto s = store_via(proxy, prefix, Millis(2'000));
      CHECK(s->ticket("arrived") == 1);  // sent again: the same key, created once
      CHECK(proxy.fired());
      CHECK(direct->ticket("arrived") == 2);
      CHECK(direct->num_keys() == 0);  // tickets are not keys of the store
    }
  }
}

TEST_CASE("a ticket counted after etcd compacted its revision is still exact (counted by listing)" *
          doctest::skip(!have_etcd())) {
  // The ticket's transaction is applied and its answer lost; while etcd answers nothing (the
  // hold), history is written past its revision and compacted, so the transaction sent again
  // (the key there: counted as of its creation) can no longer read the count then.
  LostTicketAnswer lost("compacted-ticket", Millis(3'000));
  CHECK(lost.first == 0);
  auto& [etcd, prefix, direct, first, proxy, s] = lost;
  std::atomic<bool> done{false};
  std::thread compactor([&] {
    while (!done) {
      direct->set("tick", "x");
      etcd.etcdctl("compaction " + std::to_string(direct->read_prefix("").revision));
    }
  });
  int64_t mine = -1;
  CHECK_NOTHROW(mine = s->ticket("arrived"));
  done = true;
  compactor.join();
  CHECK(proxy.fired());
  CHECK(mine == 1);
  CHECK(direct->ticket("arrived") == 2);
}

TEST_CASE("a wait in short slices reads its keys once and keeps one watch" * doctest::skip(!have_etcd())) {
  EtcdCluster& etcd = shared_etcd(1);
  auto s = store_on(etcd, unique_prefix("slices"), Millis(10'000));
  const std::string watches = "grpc_method=\"Watch\"";
  const std::string txns = "grpc_method=\"Txn\"";
  const double watch0 = etcd.metric(0, "grpc_server_msg_received_total", watches);
  const double txn0 = etcd.metric(0, "grpc_server_msg_received_total", txns);
  constexpr int kSlices = 20;
  for (int i = 0; i < kSlices; ++i) CHECK_THROWS_AS(s->wait({"late", "later"}, Millis(20)), TimeoutError);
  std::thread setter([&] {
    auto other = store_on(etcd, s->prefix(), Millis(10'000));
    other->set("late", "1");
    other->set("later", "2");
  });
  for (bool done = false; !done;) {
    try {
      s->wait({"late", "later"}, Millis(20));
      done = true;
    } catch (const TimeoutError&) {
    }
  }
  setter.join();
  const double watch_calls = etcd.metric(0, "grpc_server_msg_received_total", watches) - watch0;
  const double txn_calls = etcd.metric(0, "grpc_server_msg_received_total", txns) - txn0;
  INFO("watch messages ", watch_calls, ", transactions ", txn_calls, " for ", kSlices, "+ slices");
  CHECK(watch_calls <= 2);  // one create (a progress or cancel message at most beside)
  CHECK(txn_calls <= 1);    // the first slice's read of which keys are there
}

TEST_CASE("with patience, a call etcd answers too late is sent again; without, it is a NetworkError" *
          doctest::skip(!have_etcd())) {
  EtcdCluster& etcd = shared_etcd(1);
  const net::Endpoint member = net::parse_endpoint(etcd.endpoint(0));
  const Millis request(1'000), held(3'000);  // the answer held past the request's timeout
  for (const bool patient : {false, true}) {
    CAPTURE(patient);
    FaultProxy proxy(member, "POST /v3/kv/txn", FaultProxy::Fault::kDropAnswer, true, held);
    auto s = store_via(proxy, unique_prefix(patient ? "patient" : "impatient"), request);
    const Bytes v = Store::to_bytes("v");
    if (patient) {
      s->set_patience(Millis(20'000));
      CHECK(s->compare_set("k", {}, v) == v);  // decided again on what it finds: its own write
      CHECK(s->get_string("k") == "v");
    } else {
      CHECK_THROWS_AS(s->compare_set("k", {}, v), NetworkError);
    }
    CHECK(proxy.fired());
  }
}

namespace {

// etcd's count of unary requests of `method` ("Txn", "Range") received so far.
double requests(const EtcdCluster& etcd, const std::string& method) {
  return etcd.metric(0, "grpc_server_msg_received_total", "grpc_method=\"" + method + "\"");
}

}  // namespace

TEST_CASE("compare_set is one transaction unless the key holds an empty value; each case decided right" *
          doctest::skip(!have_etcd())) {
  EtcdCluster& etcd = shared_etcd(1);
  auto s = store_on(etcd, unique_prefix("compare_set"), Millis(10'000));
  auto b = Store::to_bytes;
  // Each call: what it returns, what the key holds after (nullopt: absent), and its requests.
  auto expect = [&](const std::string& key, const Bytes& expected, const Bytes& desired,
                    const Bytes& returned, std::optional<std::string> after, double txns) {
    CAPTURE(key);
    const double txn0 = requests(etcd, "Txn"), range0 = requests(etcd, "Range");
    CHECK(s->compare_set(key, expected, desired) == returned);
    CHECK(requests(etcd, "Txn") - txn0 == txns);
    CHECK(requests(etcd, "Range") - range0 == 0);  // the transaction's failure reads the key
    CHECK(s->get_present({key}).front() == (after ? std::optional<Bytes>(b(*after)) : std::nullopt));
  };
  expect("absent", {}, b("first"), b("first"), "first", 1);             // absent, empty expected
  expect("absent", b("first"), b("second"), b("second"), "second", 1);  // the value matches
  expect("absent", b("wrong"), b("third"), b("second"), "second", 1);   // it does not
  expect("missing", b("x"), b("y"), b("x"), std::nullopt, 1);           // absent, expected echoed
  s->set("empty", Bytes{});                                             // present, empty: matches {}
  expect("empty", {}, b("filled"), b("filled"), "filled", 2);           // then on its mod_revision
  expect("empty", {}, b("again"), b("filled"), "filled", 1);            // no longer empty
  s->set("blank", Bytes{});
  expect("blank", {}, {}, {}, "", 2);  // liveness() creates its key so: empty stays empty
}

TEST_CASE("a ticket is one transaction, exact under concurrent callers" * doctest::skip(!have_etcd())) {
  EtcdCluster& etcd = shared_etcd(1);
  const std::string prefix = unique_prefix("ticket-txn");
  constexpr int kThreads = 8;
  std::vector<std::shared_ptr<EtcdStore>> stores;
  for (int i = 0; i < kThreads; ++i) stores.push_back(store_on(etcd, prefix, Millis(10'000)));
  const double txn0 = requests(etcd, "Txn"), range0 = requests(etcd, "Range");
  std::vector<int64_t> got(kThreads, -1);
  std::vector<std::thread> threads;
  for (int i = 0; i < kThreads; ++i) threads.emplace_back([&, i] { got[i] = stores[i]->ticket("arrived"); });
  for (auto& t : threads) t.join();
  CHECK(requests(etcd, "Txn") - txn0 == kThreads);
  CHECK(requests(etcd, "Range") - range0 == 0);
  std::sort(got.begin(), got.end());
  std::vector<int64_t> want(kThreads);
  std::iota(want.begin(), want.end(), 0);
  CHECK(got == want);
  CHECK(stores[0]->tickets("arrived") == kThreads);
}

TEST_CASE("a ticket sent again after a later one was taken is ranked by its creation, not the count now" *
          doctest::skip(!have_etcd())) {
  // The ticket's transaction is applied and its answer lost; etcd then answers nothing for the
  // hold, while another caller takes the next ticket; the ticket is sent again after.
  LostTicketAnswer lost("resent-ticket", Millis(4'000));
  CHECK(lost.first == 0);
  auto& [etcd, prefix, direct, first, proxy, s] = lost;
  auto mine = std::async(std::launch::async, [&] { return s->ticket("arrived"); });
  const Deadline applied(kLong);
  while (direct->tickets("arrived") < 2 && !applied.expired()) std::this_thread::sleep_for(Millis(10));
  REQUIRE(direct->tickets("arrived") == 2);  // the lost one was applied
  CHECK(direct->ticket("arrived") == 2);
  CHECK(mine.get() == 1);  // its resend's transaction counts 3 tickets: not its rank
  CHECK(proxy.fired());
}
