// The assignment text of recovery in place (rendezvous/in_place.h).
#include "rendezvous/in_place.h"

#include <doctest/doctest.h>

#include "common/error.h"

using namespace ddp;
using namespace ddp::rdzv;

TEST_CASE("an assignment survives its text") {
  InPlaceAssignment a{3, 5, 6, 1, 2, 2, 3, "10.0.0.7", 29511};
  CHECK(decode_in_place("k", encode_in_place(a)) == a);
}

TEST_CASE("a malformed assignment is a StoreError naming the key") {
  CHECK_THROWS_WITH_AS(decode_in_place("job/round/1/assign/0", "{"),
                       doctest::Contains("job/round/1/assign/0"), StoreError);
  CHECK_THROWS_AS(decode_in_place("k", R"({"round":1,"rank":4,"world_size":4,"local_rank":0,)"
                                       R"("local_world_size":1,"node_rank":0,"nnodes":4,"master_addr":"h",)"
                                       R"("master_port":1})"),
                  StoreError);  // rank 4 of 4
}
