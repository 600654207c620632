// GlooStore: our store as Gloo sees it. Values round-trip; wait() waits for the group's timeout
// whatever timeout Gloo passes (GlooContext gives Gloo a fifth of it while connecting the mesh).
#include "comm/gloo/gloo_store.h"

#include <doctest/doctest.h>

#include <thread>

#include "common/error.h"
#include "rendezvous/hash_store.h"

using namespace ddp;
using namespace ddp::comm::gloo_backend;

TEST_CASE("GlooStore: set and get round-trip bytes") {
  GlooStore store(std::make_shared<rdzv::HashStore>(Millis(5'000)), Millis(5'000));
  const std::vector<char> value = {'a', '\0', 'b'};
  store.set("addr/1", value);
  CHECK(store.get("addr/1") == value);
}

TEST_CASE("GlooStore: wait keeps the group's timeout, not the one Gloo passes") {
  auto base = std::make_shared<rdzv::HashStore>(Millis(60'000));
  GlooStore store(base, Millis(5'000));
  std::thread late([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    base->set("addr/2", rdzv::Bytes{1});
  });
  CHECK_NOTHROW(store.wait({"addr/2"}, std::chrono::milliseconds(1)));  // 1 ms: Gloo's, ignored
  late.join();

  GlooStore quick(base, Millis(200));
  CHECK_THROWS_AS(quick.wait({"never"}, std::chrono::milliseconds(60'000)), TimeoutError);
}
