// Discovery with several participants as threads on loopback multicast. As root the test moves
// itself into a private network namespace first (unshare(CLONE_NEWNET): only `lo`, multicast on,
// a route for 239.0.0.0/8 via lo), so nothing it sends can leave it; otherwise it pins the group
// to `lo` with TTL 1 (the host's loopback routes IPv4 multicast once IP_MULTICAST_IF names it).
#include "rendezvous/multicast_discovery.h"

#include <doctest/doctest.h>
#include <sched.h>
#include <unistd.h>

#include <future>
#include <set>
#include <thread>

#include "common/auth.h"
#include "common/error.h"

using namespace ddp;
using namespace ddp::rdzv::mcast;

namespace {

const std::string kToken = "discovery-test-token";

void private_network() {
  static bool done = [] {
    if (::geteuid() != 0 || ::unshare(CLONE_NEWNET) != 0) return false;
    return ::system("ip link set lo up && ip link set lo multicast on && ip route add 239.0.0.0/8 dev lo") ==
           0;
  }();
  (void)done;
}

DiscoveryOptions options(uint16_t port, const std::string& job, int world, const std::string& host,
                         int rank = -1) {
  private_network();
  DiscoveryOptions o;
  o.socket.group = "239.255.77.1";
  o.socket.port = port;
  o.socket.interface = "lo";
  o.job_id = job;
  o.token = kToken;
  o.world = world;
  o.requested_rank = rank;
  o.host = host;
  o.addresses = {"127.0.0.1"};
  o.store_port = 1000;
  o.timeout = Millis(5000);
  return o;
}

struct Outcome {
  DiscoveryResult result;
  std::string error;
  DiscoveryStats stats;
};

// Runs each option set as a participant on its own thread, keeps every one alive until all are
// done (as the launcher keeps it until its first round), returns their outcomes in order.
// `late` starts the last participant that much later.
std::vector<Outcome> run_all(const std::vector<DiscoveryOptions>& all, Millis late = Millis(0)) {
  std::vector<Outcome> out(all.size());
  std::vector<std::unique_ptr<MulticastDiscovery>> ds(all.size());
  std::vector<std::thread> threads;
  for (size_t i = 0; i < all.size(); ++i) {
    threads.emplace_back([&, i] {
      if (i + 1 == all.size()) std::this_thread::sleep_for(late);
      try {
        ds[i] = std::make_unique<MulticastDiscovery>(all[i]);
        out[i].result = ds[i]->wait();
      } catch (const Error& e) {
        out[i].error = e.message();
      }
    });
  }
  for (auto& t : threads) t.join();
  for (size_t i = 0; i < all.size(); ++i) {
    if (ds[i]) out[i].stats = ds[i]->stats();
  }
  return out;
}

// "h3" (GCC 12 sees a false -Wrestrict in "h" + std::to_string(i)).
std::string name(char prefix, int i) {
  std::string s(1, prefix);
  s.push_back(static_cast<char>('0' + i));
  return s;
}

bool contains(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

}  // namespace

TEST_CASE("assign_ranks: requests honoured, the rest by (address, host, instance)") {
  std::vector<Participant> ps(4);
  ps[0] = {"a1", "zeta", {"10.0.0.9"}, "", 0, 0, -1};
  ps[1] = {"b2", "beta", {"10.0.0.2"}, "10.0.0.99", -1, 0, -1};  // the source does not count
  ps[2] = {"c3", "alpha", {"10.0.0.3"}, "", -1, 0, -1};
  ps[3] = {"d4", "gamma", {"10.0.0.1"}, "", 2, 0, -1};
  assign_ranks(ps, 4);
  CHECK(ps[0].rank == 0);
  CHECK(ps[3].rank == 2);
  CHECK(ps[1].rank == 1);  // 10.0.0.2 before 10.0.0.3
  CHECK(ps[2].rank == 3);
  ps[1].requested_rank = 2;
  CHECK_THROWS_WITH_AS(assign_ranks(ps, 4), doctest::Contains("rank 2 requested twice"), InvalidArgument);
  ps[1].requested_rank = 7;
  CHECK_THROWS_WITH_AS(assign_ranks(ps, 4), doctest::Contains("asks for rank 7"), InvalidArgument);
}

TEST_CASE("four participants agree on distinct ranks; requested ranks honoured") {
  std::vector<DiscoveryOptions> all;
  for (int i = 0; i < 4; ++i) all.push_back(options(29611, "four", 4, name('h', i), i == 3 ? 0 : -1));
  auto out = run_all(all);
  std::set<int> ranks;
  for (size_t i = 0; i < out.size(); ++i) {
    INFO(out[i].error);
    REQUIRE(out[i].error.empty());
    ranks.insert(out[i].result.rank);
    REQUIRE(out[i].result.by_rank.size() == 4);
    for (int r = 0; r < 4; ++r) CHECK(out[i].result.by_rank[r].host == out[0].result.by_rank[r].host);
  }
  CHECK(ranks == std::set<int>{0, 1, 2, 3});
  CHECK(out[3].result.rank == 0);  // h3 asked for 0
  CHECK(out[0].result.rank == 1);  // the rest in host order (same address)
  CHECK(out[1].result.rank == 2);
  CHECK(out[2].result.rank == 3);
  CHECK(out[1].result.by_rank[0].store_port == 1000);
  CHECK(out[1].result.by_rank[0].addresses.front() == "127.0.0.1");
  CHECK(out[1].result.by_rank[0].reachable_at().back() == "127.0.0.1");
}

TEST_CASE("a participant that never shows up: every other fails within the deadline, naming who came") {
  std::vector<DiscoveryOptions> all;
  for (int i = 0; i < 2; ++i) {
    all.push_back(options(29612, "missing", 3, name('h', i)));
    all.back().timeout = Millis(1500);
  }
  auto out = run_all(all);
  for (const auto& o : out) {
    CHECK(contains(o.error, "2 of 3 participants arrived within 1500 ms"));
    CHECK(contains(o.error, "h0 (127.0.0.1)"));
    CHECK(contains(o.error, "h1 (127.0.0.1)"));
  }
}

TEST_CASE("a rank requested twice fails every participant, naming both") {
  std::vector<DiscoveryOptions> all = {options(29613, "dup", 3, "h0", 1), options(29613, "dup", 3, "h1", 1),
                                       options(29613, "dup", 3, "h2")};
  for (auto& o : all) o.conflict_linger = Millis(500);
  auto out = run_all(all);
  for (const auto& o : out) {
    CAPTURE(o.error);
    CHECK(contains(o.error, "rank 1 requested twice"));
    CHECK((contains(o.error, "h0") && contains(o.error, "h1")));
  }
}

TEST_CASE("participants that disagree on the world size fail, saying so") {
  std::vector<DiscoveryOptions> all = {options(29614, "size", 2, "h0"), options(29614, "size", 3, "h1")};
  for (auto& o : all) {
    o.conflict_linger = Millis(300);
    o.timeout = Millis(3000);
  }
  auto out = run_all(all);
  for (const auto& o : out) CHECK(contains(o.error, "same --nnodes / world_size"));
}

TEST_CASE("two jobs with different names on the same group and port at once never mix") {
  std::vector<DiscoveryOptions> all;
  for (int i = 0; i < 3; ++i) all.push_back(options(29615, "job-a", 3, name('a', i)));
  for (int i = 0; i < 2; ++i) all.push_back(options(29615, "job-b", 2, name('b', i)));
  auto out = run_all(all);
  std::set<int> a, b;
  for (size_t i = 0; i < out.size(); ++i) {
    INFO(out[i].error);
    REQUIRE(out[i].error.empty());
    const bool job_a = i < 3;
    (job_a ? a : b).insert(out[i].result.rank);
    for (const auto& p : out[i].result.by_rank) CHECK(p.host[0] == (job_a ? 'a' : 'b'));
  }
  CHECK(a == std::set<int>{0, 1, 2});
  CHECK(b == std::set<int>{0, 1});
  uint64_t foreign = 0;
  for (const auto& o : out) foreign += o.stats.foreign + o.stats.bad_mac;
  CHECK(foreign > 0);
}

TEST_CASE("garbage, wrong-token, stale and replayed datagrams during a rendezvous are ignored and counted") {
  std::vector<DiscoveryOptions> all;
  for (int i = 0; i < 3; ++i) all.push_back(options(29616, "noisy", 3, name('n', i)));
  all[2].timeout = Millis(8000);
  std::atomic<bool> stop{false};
  std::thread noise([&] {
    SocketOptions so = all[0].socket;
    MulticastSocket s(so);
    std::vector<uint8_t> buf(kMaxDatagramSize + 1);
    Announcement forged;
    forged.job_id = "noisy";
    forged.host = "intruder";
    forged.world = 3;
    forged.requested_rank = 0;
    forged.addresses = {"127.0.0.9"};
    uint64_t seq = 0;
    std::set<std::string> replayed;
    while (!stop) {
      // Replay whatever the participants sent (once each: we hear our own replays too).
      while (auto r = s.receive(buf)) {
        std::string d(reinterpret_cast<const char*>(buf.data()), r->size);
        if (replayed.insert(d).second) s.send(std::span<const uint8_t>(buf.data(), r->size));
      }
      std::vector<uint8_t> junk(1 + seq % 1300);
      ddp::auth::random_bytes(junk.data(), junk.size());
      s.send(junk);
      ddp::auth::random_bytes(forged.instance.data(), forged.instance.size());
      forged.seq = ++seq;
      forged.time_ms = static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::milliseconds>(
                                                 std::chrono::system_clock::now().time_since_epoch())
                                                 .count());
      s.send(encode(forged, "a guessed token"));
      auto stale = forged;
      stale.time_ms -= 3'600'000;
      s.send(encode(stale, kToken));
      auto good = encode(forged, kToken);
      s.send(std::span<const uint8_t>(good.data(), good.size() / 2));  // truncated
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
  });
  // Let the noise start before the participants, then run them.
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  auto out = run_all(all, Millis(300));  // the first two listen to the noise meanwhile
  stop = true;
  noise.join();
  DiscoveryStats total;
  std::set<int> ranks;
  for (const auto& o : out) {
    INFO(o.error);
    REQUIRE(o.error.empty());
    ranks.insert(o.result.rank);
    for (const auto& p : o.result.by_rank) CHECK(p.host != "intruder");
    total.bad_mac += o.stats.bad_mac;
    total.stale += o.stats.stale;
    total.replayed += o.stats.replayed;
    total.truncated += o.stats.truncated + o.stats.malformed;
    total.not_ours += o.stats.not_ours + o.stats.bad_version + o.stats.oversized;
  }
  CHECK(ranks == std::set<int>{0, 1, 2});
  CHECK(total.bad_mac > 0);
  CHECK(total.stale > 0);
  CHECK(total.replayed > 0);
  CHECK(total.truncated > 0);
  CHECK(total.not_ours > 0);
  CHECK(contains(out[0].stats.describe(), "ignored"));
}

TEST_CASE("a host with more addresses than a datagram carries announces the first ones") {
  std::vector<DiscoveryOptions> all = {options(29618, "many", 2, "h0"), options(29618, "many", 2, "h1")};
  all[1].addresses.clear();
  for (int i = 0; i < 40; ++i) all[1].addresses.push_back("10.0.0." + std::to_string(i + 1));
  all[1].host = std::string(300, 'h');
  auto out = run_all(all);
  for (const auto& o : out) {
    INFO(o.error);
    REQUIRE(o.error.empty());
  }
  const auto& far = out[0].result.by_rank[out[1].result.rank];
  CHECK(far.addresses.size() == kMaxAddresses);
  CHECK(far.addresses.front() == "10.0.0.1");
  CHECK(far.host.size() == kMaxNameSize);
}

TEST_CASE("bad options are refused before anything is sent") {
  auto o = options(29617, "bad", 2, "h");
  o.socket.group = "10.0.0.1";
  CHECK_THROWS_AS(MulticastDiscovery{o}, InvalidArgument);
  o = options(29617, "bad", 2, "h");
  o.socket.interface = "no-such-if0";
  CHECK_THROWS_WITH_AS(MulticastDiscovery{o}, doctest::Contains("no network interface named"),
                       InvalidArgument);
  o = options(29617, "bad", 2, "h", 5);
  CHECK_THROWS_AS(MulticastDiscovery{o}, InvalidArgument);
  o = options(29617, "bad", 2, "h");
  o.socket.ttl = 0;
  CHECK_THROWS_AS(MulticastDiscovery{o}, InvalidArgument);
}
