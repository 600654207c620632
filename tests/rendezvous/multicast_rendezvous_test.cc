// Worker-level multicast rendezvous with ranks as threads on loopback multicast (as root in a
// private network namespace; else the group is pinned to lo).
#include "rendezvous/multicast_rendezvous.h"

#include <doctest/doctest.h>
#include <sched.h>
#include <unistd.h>

#include <set>
#include <thread>

#include "common/error.h"

using namespace ddp;
using namespace ddp::rdzv;

namespace {

// unshare(CLONE_NEWNET) moves the calling thread only: call it before starting the ranks' threads.
void private_network() {
  static bool done = [] {
    if (::geteuid() != 0 || ::unshare(CLONE_NEWNET) != 0) return false;
    return ::system("ip link set lo up && ip link set lo multicast on && ip route add 239.0.0.0/8 dev lo") ==
           0;
  }();
  (void)done;
}

MulticastRendezvousOptions options(const std::string& url, int world, const std::string& token) {
  private_network();
  MulticastRendezvousOptions o;
  o.method = parse_init_method(url);
  o.world_size = world;
  o.job_token = token;
  o.timeout = Millis(10'000);
  return o;
}

}  // namespace

TEST_CASE("three ranks meet: one hosts, every one reaches the same store") {
  private_network();  // on this thread, before any other: unshare() moves the calling thread only
  const std::string url = "tcp://239.255.81.1:29901?group_name=mr&interface=lo";
  std::vector<MulticastRendezvous> out(3);
  std::vector<std::string> errors(3);
  std::vector<std::thread> threads;
  for (int i = 0; i < 3; ++i) {
    threads.emplace_back([&, i] {
      try {
        out[i] = multicast_rendezvous(options(url, 3, ""));
      } catch (const Error& e) {
        errors[i] = e.message();
      }
    });
  }
  for (auto& t : threads) t.join();
  std::set<int> ranks;
  for (int i = 0; i < 3; ++i) {
    INFO(errors[i]);
    REQUIRE(errors[i].empty());
    ranks.insert(out[i].rank);
    CHECK(out[i].job_token == derive_group_token("mr"));  // no token given: derived alike everywhere
  }
  CHECK(ranks == std::set<int>{0, 1, 2});
  int hosts = 0;
  for (auto& r : out) hosts += r.hosts_server ? 1 : 0;
  CHECK(hosts == 1);
  out[1].store->set("k", "v");
  CHECK(out[2].store->get_string("k") == "v");
}

TEST_CASE("different tokens never meet: each side times out alone") {
  private_network();
  const std::string url = "tcp://239.255.81.1:29902?group_name=tok&interface=lo&timeout=1";
  std::string e1, e2;
  std::thread a([&] {
    try {
      multicast_rendezvous(options(url, 2, "token-a"));
    } catch (const TimeoutError& e) {
      e1 = e.message();
    }
  });
  try {
    multicast_rendezvous(options(url, 2, "token-b"));
  } catch (const TimeoutError& e) {
    e2 = e.message();
  }
  a.join();
  CHECK(e1.find("1 of 2 participants") != std::string::npos);
  CHECK(e2.find("1 of 2 participants") != std::string::npos);
  CHECK((e1.find("wrong MAC") != std::string::npos || e2.find("wrong MAC") != std::string::npos));
}

TEST_CASE("the derived token is pinned; a non-multicast method is refused") {
  CHECK(derive_group_token("job") == derive_group_token("job"));
  CHECK(derive_group_token("job") != derive_group_token("job2"));
  CHECK(derive_group_token("job").size() == 32);
  MulticastRendezvousOptions o;
  o.method = parse_init_method("tcp://127.0.0.1:1");
  CHECK_THROWS_AS(multicast_rendezvous(o), InvalidArgument);
}
