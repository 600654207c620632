#include "rendezvous/hash_store.h"

#include <doctest/doctest.h>

#include <thread>

#include "common/error.h"
#include "rendezvous/prefix_store.h"

using namespace ddp;
using namespace ddp::rdzv;

TEST_CASE("HashStore basics (the full conformance suite runs against every store)") {
  HashStore s;
  s.set("a", "1");
  CHECK(s.get_string("a") == "1");
  CHECK(s.add("n", 5) == 5);
  CHECK(s.add("n", -2) == 3);
  CHECK_THROWS_AS(s.get("missing", Millis(20)), TimeoutError);
  std::thread t([&] { s.set("late", "x"); });
  CHECK(s.get_string("late", Millis(5000)) == "x");
  t.join();
}

TEST_CASE("PrefixStore namespaces keys") {
  auto base = std::make_shared<HashStore>();
  PrefixStore p("g1", base);
  p.set("k", "v");
  CHECK(base->get_string("g1/k") == "v");
  CHECK_FALSE(p.check({"other"}));
}
