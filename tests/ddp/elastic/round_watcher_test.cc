// RoundWatcher over the in-process store, a TCPStore and an EtcdStore (a real etcd, Skipped where
// /usr/bin/etcd is missing): each watched through a clone of its own, interrupted to stop. A
// watcher that never stopped would hang the destructor: that shows as the ctest's TIMEOUT, not
// as a failed check.
#include "ddp/elastic/round_watcher.h"

#include "rendezvous/round_outcome.h"

#include <doctest/doctest.h>

#include <future>
#include <memory>
#include <string>

#include "rendezvous/etcd_cluster.h"
#include "rendezvous/etcd_store.h"
#include "rendezvous/hash_store.h"
#include "rendezvous/tcp_store.h"

using namespace ddp;

namespace {

std::shared_ptr<rdzv::Store> make_store(bool tcp) {
  if (!tcp) return std::make_shared<rdzv::HashStore>(Millis(30'000));
  rdzv::TCPStoreOptions o;
  o.is_server = true;
  o.timeout = Millis(30'000);
  return std::make_shared<rdzv::TCPStore>(o);
}

}  // namespace

TEST_CASE("a membership change is passed on once, with the outcome's text") {
  for (bool tcp : {false, true}) {
    CAPTURE(tcp);
    auto store = make_store(tcp);
    std::promise<std::string> seen;
    int calls = 0;
    {
      elastic::RoundWatcher w({store, "run", 3, [&](const rdzv::RoundOutcome& outcome) {
                                 ++calls;
                                 seen.set_value(outcome.text());
                               }});
      store->set("run/round/3/outcome", "changed: node 1 (h2) lost");
      CHECK(seen.get_future().get() == "changed: node 1 (h2) lost");
      CHECK(w.fired());
    }
    CHECK(calls == 1);
  }
}

TEST_CASE("another outcome, or none before the watcher stops, is not passed on") {
  for (bool tcp : {false, true}) {
    CAPTURE(tcp);
    auto store = make_store(tcp);
    int calls = 0;
    {
      elastic::RoundWatcher w({store, "run", 0, [&](const rdzv::RoundOutcome&) { ++calls; }});
    }  // stopped while waiting (or before it began)
    {
      store->set("run/round/1/outcome", "failed: node 0: rank 1 exited with code 1");
      elastic::RoundWatcher w({store, "run", 1, [&](const rdzv::RoundOutcome&) { ++calls; }});
    }
    CHECK(calls == 0);
  }
}

TEST_CASE("over etcd: a membership change is passed on; stopping ends the watch" *
          doctest::skip(!rdzv::testing::have_etcd())) {
  auto& etcd = rdzv::testing::shared_etcd(1);
  auto store = std::make_shared<rdzv::EtcdStore>(
      rdzv::EtcdStoreOptions{.client = etcd.client_options(),
                             .prefix = rdzv::testing::unique_prefix("watcher"),
                             .timeout = Millis(30'000)});
  int calls = 0;
  {
    elastic::RoundWatcher w({store, "run", 0, [&](const rdzv::RoundOutcome&) { ++calls; }});
  }  // stopped while waiting
  CHECK(calls == 0);
  std::promise<std::string> seen;
  {
    elastic::RoundWatcher w({store, "run", 1, [&](const rdzv::RoundOutcome& outcome) {
                               ++calls;
                               seen.set_value(outcome.text());
                             }});
    store->set("run/round/1/outcome", "changed: node 0 (h1) lost");
    CHECK(seen.get_future().get() == "changed: node 0 (h1) lost");
  }
  CHECK(calls == 1);
}
