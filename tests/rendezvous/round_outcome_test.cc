// A round's outcome (rendezvous/round_outcome.h): typed, and the stored text launchers and
// workers of other versions read.
#include "rendezvous/round_outcome.h"

#include <doctest/doctest.h>

using namespace ddp::rdzv;

TEST_CASE("outcomes keep their stored text, and decode back to the same kind") {
  CHECK(RoundOutcome::done().text() == "done");
  CHECK(RoundOutcome::failed("node 1 (h1): rank 3 exited with code 1").text() ==
        "failed: node 1 (h1): rank 3 exited with code 1");
  CHECK(RoundOutcome::interrupted("h0 got SIGINT").text() == "interrupted: h0 got SIGINT");
  CHECK(RoundOutcome::lost("node(s) 1 did not reach").text() == "lost: node(s) 1 did not reach");
  CHECK(RoundOutcome::changed("node 1 (h1) lost").text() == "changed: node 1 (h1) lost");
  for (const auto& o : {RoundOutcome::done(), RoundOutcome::failed("x: y"), RoundOutcome::interrupted("z"),
                        RoundOutcome::lost("w"), RoundOutcome::changed("v")}) {
    CHECK(RoundOutcome::decode(o.text()) == o);
  }
  CHECK(RoundOutcome::decode("something else") == RoundOutcome::failed("something else"));
}

TEST_CASE("only interrupted and lost are final; only changed moves workers in place") {
  CHECK(RoundOutcome::interrupted("a").final());
  CHECK(RoundOutcome::lost("a").final());
  CHECK_FALSE(RoundOutcome::failed("a").final());
  CHECK_FALSE(RoundOutcome::changed("a").final());
  CHECK_FALSE(RoundOutcome::done().final());
  CHECK(RoundOutcome::decode("changed: node 1 lost").membership_change());
  CHECK_FALSE(RoundOutcome::decode("failed: node 0: rank 1 exited").membership_change());
  CHECK_FALSE(RoundOutcome::decode("done").membership_change());
  CHECK_FALSE(RoundOutcome::decode("changed").membership_change());  // no detail: not the stored form
}
