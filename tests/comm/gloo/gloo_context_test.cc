#include "comm/gloo/gloo_context.h"

#include <doctest/doctest.h>

#include <cstdlib>
#include <thread>

#include "comm/gloo/ranks.h"
#include "common/error.h"
#include "rendezvous/hash_store.h"

using namespace ddp;
using namespace ddp::comm;
using namespace ddp::comm::gloo_backend;

TEST_CASE("device_address: DDP_SOCKET_IFNAME wins, MASTER_ADDR picks the route, loopback otherwise") {
  ::setenv("DDP_SOCKET_IFNAME", "lo", 1);
  CHECK(device_address().iface == "lo");
  ::unsetenv("DDP_SOCKET_IFNAME");
  ::unsetenv("GLOO_SOCKET_IFNAME");
  ::setenv("MASTER_ADDR", "127.0.0.1", 1);
  CHECK(device_address().hostname == "127.0.0.1");
  ::unsetenv("MASTER_ADDR");
  CHECK(device_address().hostname == "127.0.0.1");
}

TEST_CASE("GlooContext: connects through the store and names peers in gloo messages") {
  auto store = std::make_shared<rdzv::HashStore>(Millis(30'000));
  std::unique_ptr<GlooContext> c0, c1;
  std::thread t([&] { c1 = std::make_unique<GlooContext>(test::setup_for(store, 1, 2)); });
  c0 = std::make_unique<GlooContext>(test::setup_for(store, 0, 2));
  t.join();
  CHECK(c0->get()->size == 2);
  CHECK(c1->get()->rank == 1);
  CHECK(c0->describe("no address here") == "no address here");
  CHECK(c0->peer_in("Connection closed by peer [10.9.9.9]:1") == -1);
}

TEST_CASE("GlooContext: a rank that never arrives is the store's TimeoutError") {
  // Gloo waits for the peers' addresses for the group's timeout.
  auto store = std::make_shared<rdzv::HashStore>(Millis(60'000));
  CHECK_THROWS_AS(GlooContext(test::setup_for(store, 0, 2, Millis(300))), TimeoutError);
}
