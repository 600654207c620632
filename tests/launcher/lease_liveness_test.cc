// LeaseLiveness against a real etcd (tests/rendezvous/etcd_cluster.h; Skipped where /usr/bin/etcd
// is missing): a launcher's key lives under its lease; a peer whose lease expires (it stopped
// renewing: its process died) is lost for every watcher; a peer absent when a round is watched
// is lost at once; live peers never are, and a failure's all_beat_since comes from their
// leases' time-to-live; a lease that etcd dropped is granted again; etcd gone is store_lost()
// naming its members; a clean exit revokes the lease (the key goes at once).
#include "launcher/lease_liveness.h"

#include <doctest/doctest.h>

#include <stdio.h>

#include <atomic>
#include <nlohmann/json.hpp>
#include <sstream>
#include <thread>

#include "common/error.h"
#include "rendezvous/etcd_cluster.h"
#include "rendezvous/etcd_store.h"
#include "rendezvous/job_keys.h"

using namespace ddp;
using namespace ddp::launcher;
using rdzv::testing::EtcdCluster;
using rdzv::testing::have_etcd;
using rdzv::testing::shared_etcd;
using rdzv::testing::unique_prefix;

namespace {

constexpr Millis kInterval{200};
constexpr int kMaxAttempt = 5;
// A loaded 2-core machine can starve a thread for seconds: the margin keeps a detection bound
// asserted, not its tightness.
constexpr Millis kMargin{15'000};

bool eventually(const std::function<bool()>& cond, Millis limit) {
  const auto end = Clock::now() + limit;
  while (Clock::now() < end) {
    if (cond()) return true;
    std::this_thread::sleep_for(Millis(20));
  }
  return cond();
}

struct Launcher {
  std::atomic<int> wakes{0};
  std::unique_ptr<LeaseLiveness> live;
  std::string id;
};

LeaseLivenessOptions options(const EtcdCluster& etcd, const std::string& prefix, const std::string& id) {
  LeaseLivenessOptions o;
  o.client = etcd.client_options();
  o.prefix = prefix;
  o.run_id = "job";
  o.id = id;
  o.interval = kInterval;
  o.max_attempt = kMaxAttempt;
  return o;
}

// Launcher "a"'s options with etcd at a port where nothing listens.
LeaseLivenessOptions unreachable_options() {
  LeaseLivenessOptions o;
  o.client.endpoints = {"127.0.0.1:" + std::to_string(net::pick_free_port())};
  o.id = "a";
  o.interval = kInterval;
  o.max_attempt = kMaxAttempt;
  return o;
}

std::unique_ptr<Launcher> start(const EtcdCluster& etcd, const std::string& prefix, const std::string& id) {
  auto l = std::make_unique<Launcher>();
  l->id = id;
  auto o = options(etcd, prefix, id);
  o.on_loss = [p = l.get()] { ++p->wakes; };
  l->live = std::make_unique<LeaseLiveness>(std::move(o));
  return l;
}

LivenessRound round_of(int round, int me, const std::vector<std::string>& ids) {
  LivenessRound r;
  r.round = round;
  r.node_rank = me;
  for (size_t i = 0; i < ids.size(); ++i) r.nodes.push_back({ids[i], "node " + std::to_string(i)});
  return r;
}

// A peer that registered as a launcher does and then died: its lease is never renewed.
int64_t dead_peer(rdzv::EtcdStore& store, const std::string& id, int64_t ttl) {
  const auto g = store.client().grant_lease(ttl);
  store.set_with_lease(rdzv::JobKeys("job").alive(id), rdzv::Store::to_bytes(std::to_string(g.id)), g.id);
  return g.id;
}

// What a command printed on stdout (empty when it failed to start).
std::string output_of(const std::string& cmd) {
  std::string out;
  FILE* f = ::popen(cmd.c_str(), "r");
  if (f == nullptr) return out;
  char buf[4096];
  for (size_t n; (n = ::fread(buf, 1, sizeof buf, f)) > 0;) out.append(buf, n);
  ::pclose(f);
  return out;
}

// Hands the cluster's leadership to another member (etcdctl move-leader): the new leader
// refreshes every lease to its full TTL. False when etcdctl could not say who leads.
bool move_leader(const rdzv::testing::EtcdCluster& etcd) {
  std::string all;
  for (const auto& e : etcd.endpoints()) all += (all.empty() ? "" : ",") + e;
  const auto status = nlohmann::json::parse(
      output_of("ETCDCTL_API=3 /usr/bin/etcdctl --endpoints=" + all + " endpoint status -w json"), nullptr,
      false);
  if (!status.is_array() || status.empty()) return false;
  const uint64_t leader = status[0]["Status"]["leader"].get<uint64_t>();
  std::string leader_endpoint;
  uint64_t other = 0;
  for (const auto& m : status) {
    const uint64_t id = m["Status"]["header"]["member_id"].get<uint64_t>();
    if (id == leader)
      leader_endpoint = m["Endpoint"].get<std::string>();
    else
      other = id;
  }
  if (leader_endpoint.empty() || other == 0) return false;
  std::ostringstream cmd;
  cmd << "ETCDCTL_API=3 /usr/bin/etcdctl --endpoints=" << leader_endpoint << " move-leader " << std::hex
      << other << " > /dev/null 2>&1";
  return std::system(cmd.str().c_str()) == 0;
}

std::vector<std::string> ids_of(const std::vector<LivenessPeer>& peers) {
  std::vector<std::string> out;
  for (const auto& p : peers) out.push_back(p.id);
  return out;
}

}  // namespace

TEST_CASE("a peer whose lease expires is lost for every watcher; live ones never are" *
          doctest::skip(!have_etcd())) {
  auto& etcd = shared_etcd(1);
  const std::string prefix = unique_prefix("lease");
  rdzv::EtcdStore raw(rdzv::EtcdStoreOptions{.client = etcd.client_options(), .prefix = prefix});
  auto a = start(etcd, prefix, "a");
  auto b = start(etcd, prefix, "b");
  dead_peer(raw, "c", 2);
  const auto round = [&](int me) { return round_of(0, me, {"a", "b", "c"}); };
  a->live->watch(round(0));
  b->live->watch(round(1));
  CHECK(a->live->bound() >= kInterval * kMaxAttempt);
  REQUIRE(eventually([&] { return a->live->lost().size() == 1 && b->live->lost().size() == 1; },
                     a->live->bound() + kMargin));
  CHECK(ids_of(a->live->lost()) == std::vector<std::string>{"c"});
  CHECK(ids_of(b->live->lost()) == std::vector<std::string>{"c"});
  CHECK(a->wakes > 0);
  // Several bounds later a and b still see each other alive.
  std::this_thread::sleep_for(3 * a->live->bound());
  CHECK(a->live->lost().size() == 1);
  CHECK(b->live->lost().size() == 1);
  CHECK_FALSE(a->live->store_lost());
}

TEST_CASE("a peer absent when the round is watched is lost at once; a new round forgets" *
          doctest::skip(!have_etcd())) {
  auto& etcd = shared_etcd(1);
  const std::string prefix = unique_prefix("lease");
  auto a = start(etcd, prefix, "a");
  a->live->watch(round_of(0, 0, {"a", "ghost"}));
  REQUIRE(eventually([&] { return a->live->lost().size() == 1; }, kMargin));
  CHECK(a->live->lost()[0].name == "node 1");
  auto b = start(etcd, prefix, "b");
  a->live->watch(round_of(1, 0, {"a", "b"}));
  CHECK(a->live->lost().empty());
  std::this_thread::sleep_for(2 * a->live->bound());
  CHECK(a->live->lost().empty());
}

TEST_CASE("a round with arrivals is watched from its first: a peer dead since is lost, one put back is not" *
          doctest::skip(!have_etcd())) {
  auto& etcd = shared_etcd(1);
  const std::string prefix = unique_prefix("lease");
  rdzv::EtcdStore raw(rdzv::EtcdStoreOptions{.client = etcd.client_options(), .prefix = prefix});
  auto a = start(etcd, prefix, "a");
  dead_peer(raw, "c", 1);
  dead_peer(raw, "d", 1);
  const std::string arrived = rdzv::RoundKeys("job", 0).arrived();
  CHECK(raw.first_ticket_revision(arrived) == 0);
  for (int i = 0; i < 3; ++i) raw.ticket(arrived);  // the round's arrivals: c and d were alive then
  REQUIRE(raw.first_ticket_revision(arrived) > 0);
  // Both leases lapse before a watches the round; d's launcher comes back with a new one.
  REQUIRE(eventually(
      [&] {
        return !raw.check({rdzv::JobKeys("job").alive("c")}) && !raw.check({rdzv::JobKeys("job").alive("d")});
      },
      kMargin));
  auto d = start(etcd, prefix, "d");
  a->live->watch(round_of(0, 0, {"a", "c", "d"}));
  REQUIRE(eventually([&] { return a->live->lost().size() == 1; }, kMargin));  // from the history alone
  CHECK(ids_of(a->live->lost()) == std::vector<std::string>{"c"});
  // d's lease, unknown to a history of deletions, is read when someone asks for beats.
  const auto since = Clock::now();
  CHECK(eventually([&] { return a->live->all_beat_since(since); }, kMargin));
  CHECK(ids_of(a->live->lost()) == std::vector<std::string>{"c"});
}

TEST_CASE("all_beat_since: proven by the peers' leases renewed after it" * doctest::skip(!have_etcd())) {
  auto& etcd = shared_etcd(1);
  const std::string prefix = unique_prefix("lease");
  rdzv::EtcdStore raw(rdzv::EtcdStoreOptions{.client = etcd.client_options(), .prefix = prefix});
  auto a = start(etcd, prefix, "a");
  auto b = start(etcd, prefix, "b");
  a->live->watch(round_of(0, 0, {"a", "b"}));
  const auto since = Clock::now();
  CHECK_FALSE(a->live->all_beat_since(since));  // nothing known yet
  CHECK(eventually([&] { return a->live->all_beat_since(since); }, a->live->bound() + kMargin));
  // A peer that stopped renewing never proves it: it is lost instead.
  dead_peer(raw, "d", 10);
  a->live->watch(round_of(1, 0, {"a", "d"}));
  const auto later = Clock::now();
  std::this_thread::sleep_for(4 * kInterval);
  CHECK_FALSE(a->live->all_beat_since(later));
  // Alone in a round: nothing to prove.
  a->live->watch(round_of(2, 0, {"a"}));
  CHECK(a->live->all_beat_since(Clock::now()));
}

TEST_CASE("all_beat_since: a new leader's refresh of a dead peer's lease is no beat" *
          doctest::skip(!have_etcd())) {
  auto& etcd = shared_etcd(3);
  const std::string prefix = unique_prefix("lease");
  rdzv::EtcdStore raw(rdzv::EtcdStoreOptions{.client = etcd.client_options(), .prefix = prefix});
  auto a = start(etcd, prefix, "a");
  dead_peer(raw, "d", 6);
  a->live->watch(round_of(0, 0, {"a", "d"}));
  const auto later = Clock::now();
  CHECK_FALSE(a->live->all_beat_since(later));  // starts the time-to-live answers
  std::this_thread::sleep_for(2 * kInterval);
  REQUIRE(move_leader(etcd));  // every lease refreshed to its full TTL: "d" seems renewed now
  // For 3 s after the refresh, "d" is never taken for a live peer (one answer proves nothing).
  const auto until = Clock::now() + std::chrono::seconds(3);
  bool beat = false;
  while (Clock::now() < until && !beat) {
    beat = a->live->all_beat_since(later);
    std::this_thread::sleep_for(kInterval / 2);
  }
  CHECK_FALSE(beat);
  // And it is lost once its lease runs out.
  CHECK(eventually([&] { return ids_of(a->live->lost()) == std::vector<std::string>{"d"}; },
                   Millis(12'000) + kMargin));
}

TEST_CASE("a lease etcd dropped is granted again; a clean exit revokes it" * doctest::skip(!have_etcd())) {
  auto& etcd = shared_etcd(1);
  const std::string prefix = unique_prefix("lease");
  rdzv::EtcdStore raw(rdzv::EtcdStoreOptions{.client = etcd.client_options(), .prefix = prefix});
  auto a = start(etcd, prefix, "a");
  const int64_t first = a->live->lease();
  REQUIRE(first != 0);
  CHECK(raw.check({rdzv::JobKeys("job").alive("a")}));
  REQUIRE(raw.client().revoke(first));  // as etcd does when no keep-alive came for the TTL
  REQUIRE(eventually([&] { return a->live->lease() != first && a->live->lease() != 0; }, kMargin));
  CHECK(eventually([&] { return raw.check({rdzv::JobKeys("job").alive("a")}); }, kMargin));
  CHECK(raw.get_string(rdzv::JobKeys("job").alive("a")) == std::to_string(a->live->lease()));
  const int64_t second = a->live->lease();
  a.reset();
  CHECK_FALSE(raw.check({rdzv::JobKeys("job").alive("a")}));
  CHECK(raw.client().time_to_live(second).ttl == -1);
}

TEST_CASE("etcd gone: store_lost() within the bound, naming its members" * doctest::skip(!have_etcd())) {
  EtcdCluster etcd;  // its own: killed here
  const std::string prefix = unique_prefix("lease");
  auto a = start(etcd, prefix, "a");
  a->live->watch(round_of(0, 0, {"a", "b"}));
  etcd.kill(0);
  REQUIRE(eventually([&] { return a->live->store_lost().has_value(); }, a->live->bound() + kMargin));
  const std::string why = *a->live->store_lost();
  CAPTURE(why);
  CHECK(why.find("etcd at " + etcd.endpoint(0)) != std::string::npos);
  CHECK(why.find("keep_alive_interval x keep_alive_max_attempt") != std::string::npos);
  CHECK(a->wakes > 0);
  a.reset();  // the revoke gives up within its bound
}

TEST_CASE(
    "before its first round a launcher waits out join_patience for etcd; once watching, a bound from then" *
    doctest::skip(!have_etcd())) {
  LeaseLivenessOptions o = unreachable_options();
  o.join_patience = Millis(600'000);  // far past this test
  LeaseLiveness l(std::move(o));
  std::this_thread::sleep_for(kInterval * kMaxAttempt * 3);  // three bounds without an answer
  CHECK_FALSE(l.store_lost());
  const auto watched = Clock::now();
  l.watch(LivenessRound{});  // a round: the bound now applies, counted from this first watch
  Clock::time_point seen{};
  CHECK(eventually(
      [&] {
        seen = Clock::now();
        return l.store_lost().has_value();
      },
      l.bound() + kMargin));
  CHECK(seen - watched >= l.bound());  // not at once, though the last answer is long past
  CHECK(l.store_lost()->find("keep_alive_interval x keep_alive_max_attempt") != std::string::npos);
}

TEST_CASE("etcd unreachable at start: the keeper tries again; after the bound etcd is lost, named" *
          doctest::skip(!have_etcd())) {
  LeaseLivenessOptions o = unreachable_options();
  const std::string endpoint = o.client.endpoints[0];
  std::atomic<int> wakes{0};
  o.on_loss = [&] { ++wakes; };
  LeaseLiveness l(std::move(o));  // no answer is not a refusal: no throw
  CHECK_FALSE(l.store_lost());
  CHECK(eventually([&] { return l.store_lost().has_value(); }, kInterval * kMaxAttempt + kMargin));
  CHECK(l.store_lost()->find(endpoint) != std::string::npos);
  CHECK(wakes > 0);
}
