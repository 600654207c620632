#include "rendezvous/key_table.h"

#include <doctest/doctest.h>

#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "common/error.h"

using namespace ddp;
using namespace ddp::rdzv;

namespace {
Bytes b(const std::string& s) { return Store::to_bytes(s); }
using Woken = KeyTable::Woken;
}  // namespace

TEST_CASE("set, find, erase, size and missing") {
  KeyTable t;
  CHECK(t.find("a") == nullptr);
  CHECK(t.set("a", b("1")).empty());
  REQUIRE(t.find("a") != nullptr);
  CHECK(*t.find("a") == b("1"));
  CHECK(t.set("a", b("2")).empty());
  CHECK(*t.find("a") == b("2"));
  CHECK(t.size() == 1);
  CHECK(t.missing({"a", "b", "c"}) == std::vector<std::string>{"b", "c"});
  CHECK(t.erase("a"));
  CHECK_FALSE(t.erase("a"));
  CHECK(t.size() == 0);
}

TEST_CASE("add: a missing key starts at delta; a counter adds; anything else is refused, unchanged") {
  KeyTable t;
  CHECK(t.add("n", 5).value == 5);
  CHECK(t.add("n", -7).value == -2);
  CHECK(*t.find("n") == b("-2"));
  (void)t.set("text", b("hello"));
  CHECK_THROWS_AS((void)t.add("text", 1), InvalidArgument);
  CHECK(*t.find("text") == b("hello"));
  (void)t.set("big", b(std::to_string(std::numeric_limits<int64_t>::max())));
  CHECK_THROWS_WITH_AS((void)t.add("big", 1), doctest::Contains("big"), InvalidArgument);
  CHECK(*t.find("big") == b(std::to_string(std::numeric_limits<int64_t>::max())));
}

TEST_CASE("compare_set: c10d's rule for missing keys, matches and mismatches") {
  KeyTable t;
  CHECK(t.compare_set("k", b("x"), b("y")).value == b("x"));  // missing, expected not empty
  CHECK(t.find("k") == nullptr);
  CHECK(t.compare_set("k", {}, b("first")).value == b("first"));
  CHECK(t.compare_set("k", b("wrong"), b("second")).value == b("first"));
  CHECK(t.compare_set("k", b("first"), b("second")).value == b("second"));
  CHECK(*t.find("k") == b("second"));
}

TEST_CASE("wait: present keys answer at once; a missing one parks until a write completes it") {
  KeyTable t;
  (void)t.set("a", b("1"));
  CHECK(t.wait(10, {"a"}));
  CHECK(t.parked() == 0);
  CHECK_FALSE(t.wait(11, {"a", "b", "c"}));
  CHECK(t.parked() == 1);
  CHECK(t.set("x", b("0")).empty());        // not a key it waits for
  CHECK(t.set("b", b("2")).empty());        // still missing c: parked again, under c
  CHECK(t.add("c", 1).woken == Woken{11});  // complete: returned and forgotten
  CHECK(t.parked() == 0);
  CHECK(t.set("c", b("3")).empty());
}

TEST_CASE(
    "wait: every waiter on a key is woken, in the order they parked; compare_set wakes when it writes") {
  KeyTable t;
  CHECK_FALSE(t.wait(3, {"k"}));
  CHECK_FALSE(t.wait(1, {"k"}));
  CHECK_FALSE(t.wait(2, {"other"}));
  CHECK(t.compare_set("k", b("nope"), b("v")).woken.empty());  // missing key, not written
  CHECK(t.compare_set("k", {}, b("v")).woken == Woken{3, 1});
  CHECK(t.parked() == 1);
}

TEST_CASE("wait: deleting a key wakes nobody; a waiter may be cancelled, or replaced by its next wait") {
  KeyTable t;
  (void)t.set("gone", b("1"));
  CHECK_FALSE(t.wait(1, {"k"}));
  CHECK(t.erase("gone"));
  CHECK(t.parked() == 1);
  t.cancel(1);
  t.cancel(99);  // unknown: ignored
  CHECK(t.parked() == 0);
  CHECK(t.set("k", b("v")).empty());
  CHECK_FALSE(t.wait(2, {"a"}));
  CHECK_FALSE(t.wait(2, {"b"}));  // the same id: the wait on "a" is dropped
  CHECK(t.parked() == 1);
  CHECK(t.set("a", b("1")).empty());
  CHECK(t.set("b", b("1")) == Woken{2});
}
