// PeerMesh: addresses round-trip, every pair connects, and a wrong job token is refused.
#include "comm/tcp/peer_mesh.h"

#include <doctest/doctest.h>

#include <thread>

#include "common/error.h"
#include "rendezvous/hash_store.h"

using namespace ddp;
using namespace ddp::comm::tcp;

TEST_CASE("PeerAddress encodes and decodes; garbage is InvalidArgument") {
  PeerAddress a = PeerAddress::local(1234);
  PeerAddress b = PeerAddress::decode(a.encode());
  CHECK(b.port == 1234);
  CHECK(b.boot_id == a.boot_id);
  CHECK(b.pid == a.pid);
  CHECK(b.addrs == a.addrs);
  CHECK_FALSE(b.addrs.empty());
  CHECK_THROWS_AS(PeerAddress::decode("nonsense"), InvalidArgument);
  CHECK_THROWS_AS(PeerAddress::decode("x\nb\nc\nd\ne"), InvalidArgument);
}

TEST_CASE("every pair of ranks gets one connection") {
  rdzv::HashStore store;
  std::vector<Mesh> meshes(4);
  std::vector<std::thread> threads;
  for (int r = 0; r < 4; ++r) {
    threads.emplace_back([&, r] { meshes[r] = build_mesh(store, {r, 4, "tok", "g"}, Deadline(Millis(30'000))); });
  }
  for (auto& t : threads) t.join();
  for (int r = 0; r < 4; ++r) {
    for (int p = 0; p < 4; ++p) CHECK(meshes[r].fds[p].valid() == (p != r));
  }
}

TEST_CASE("a wrong job token is refused; the acceptor keeps waiting for the real peer") {
  rdzv::HashStore store;
  std::string refused, timed_out;
  std::thread rank0([&] {
    try {
      build_mesh(store, {0, 2, "right", "g"}, Deadline(Millis(1500)));
    } catch (const TimeoutError& e) {
      timed_out = e.message();
    }
  });
  try {
    build_mesh(store, {1, 2, "wrong", "g"}, Deadline(Millis(30'000)));
  } catch (const NetworkError& e) {
    refused = e.message();
  }
  rank0.join();
  CAPTURE(refused);
  CAPTURE(timed_out);
  CHECK(refused.find("refused") != std::string::npos);
  CHECK(refused.find("job token") != std::string::npos);
  CHECK(timed_out.find("[1]") != std::string::npos);
}
