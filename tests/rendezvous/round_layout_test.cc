// The values of a round's joining keys (rendezvous/round_layout.h): wire formats, spelled out,
// and each malformed form a StoreError naming its key.
#include "rendezvous/round_layout.h"

#include <doctest/doctest.h>

#include "common/error.h"

using namespace ddp;
using namespace ddp::rdzv;

TEST_CASE("a shape survives its text, '<nnodes> <static|dynamic> <host>'") {
  CHECK(encode_shape({4, true, "h1"}) == "4 dynamic h1");
  CHECK(decode_shape("k", "4 dynamic h1") == RoundShape{4, true, "h1"});
  CHECK(decode_shape("k", encode_shape({2, false, "node-b"})) == RoundShape{2, false, "node-b"});
}

TEST_CASE("a malformed shape is a StoreError naming the key") {
  for (const char* bad : {"", "4", "4 sideways h1", "0 static h1", "x static h1", "4 static"}) {
    CAPTURE(bad);
    CHECK_THROWS_WITH_AS(decode_shape("job/round/0/shape", bad), doctest::Contains("job/round/0/shape"),
                         StoreError);
  }
}

TEST_CASE("a layout survives its text; only host, id and nproc travel") {
  RoundLayout l;
  l.master_addr = "10.0.0.1";
  l.restarts = 2;
  l.nodes = {NodeInfo{"h1", {"10.0.0.1"}, 2, -1, "h1-10", 0, 0}, NodeInfo{"h2", {}, 1, 1, "h2-11", 1, 0}};
  const std::string text = encode_layout(l);
  CHECK(text == R"({"master_addr":"10.0.0.1","nodes":[["h1","h1-10",2],["h2","h2-11",1]],"restarts":2})");
  const RoundLayout back = decode_layout("k", Store::to_bytes(text), 2);
  CHECK(back.master_addr == "10.0.0.1");
  CHECK(back.restarts == 2);
  REQUIRE(back.nodes.size() == 2);
  CHECK(back.nodes[1].host == "h2");
  CHECK(back.nodes[1].id == "h2-11");
  CHECK(back.nodes[1].nproc == 1);
  CHECK(back.nodes[1].addresses.empty());
  CHECK_THROWS_AS(decode_layout("k", Store::to_bytes(text), 3), StoreError);  // not 3 nodes
}

TEST_CASE("node 0's MASTER_PORT travels in the layout when offered; a layout without it reads 0") {
  RoundLayout l;
  l.master_addr = "10.0.0.1";
  l.master_port = 29501;
  l.nodes = {NodeInfo{"h1", {}, 1, -1, "h1-10", 0, 29501}};
  const std::string text = encode_layout(l);
  CHECK(text == R"({"master_addr":"10.0.0.1","master_port":29501,"nodes":[["h1","h1-10",1]],"restarts":-1})");
  CHECK(decode_layout("k", Store::to_bytes(text), 1).master_port == 29501);
  const std::string earlier = R"({"master_addr":"10.0.0.1","nodes":[["h1","h1-10",1]],"restarts":-1})";
  CHECK(decode_layout("k", Store::to_bytes(earlier), 1).master_port == 0);
  for (const char* bad : {"0", "65536", "\"29501\""}) {
    CAPTURE(bad);
    const std::string malformed =
        std::string(R"({"master_addr":"h","master_port":)") + bad + R"(,"nodes":[["h","i",1]],"restarts":0})";
    CHECK_THROWS_WITH_AS(decode_layout("job/round/0/layout", Store::to_bytes(malformed), 1),
                         doctest::Contains("job/round/0/layout"), StoreError);
  }
}

TEST_CASE("a broken round's layout is its reason, as InvalidArgument") {
  const auto text = Store::to_bytes(encode_layout_failure("node rank 1 claimed twice"));
  CHECK_THROWS_WITH_AS(decode_layout("k", text, 2), doctest::Contains("node rank 1 claimed twice"),
                       InvalidArgument);
  CHECK_THROWS_WITH_AS(decode_layout("k", Store::to_bytes(encode_layout_failure("")), 2),
                       doctest::Contains("marked broken"), InvalidArgument);
}

TEST_CASE("a malformed layout is a StoreError naming the key") {
  for (const char* bad : {"{", "[]", R"({"master_addr":"h","restarts":0,"nodes":[["h",1,1]]})",
                          R"({"master_addr":"h","restarts":0,"nodes":[["h","i",0]]})", R"({"failed":3})"}) {
    CAPTURE(bad);
    CHECK_THROWS_WITH_AS(decode_layout("job/round/0/layout", Store::to_bytes(bad), 1),
                         doctest::Contains("job/round/0/layout"), StoreError);
  }
}

TEST_CASE("an elastic round's node count is decimal; anything else is a StoreError") {
  CHECK(encode_closed(3) == "3");
  CHECK(decode_closed("k", "3") == 3);
  for (const char* bad : {"", "x", "3x", "-1"}) {
    CAPTURE(bad);
    CHECK_THROWS_WITH_AS(decode_closed("job/round/2/closed", bad), doctest::Contains("job/round/2/closed"),
                         StoreError);
  }
}
