// PeerMesh: addresses round-trip, every pair connects, and a wrong job token is refused.
#include "comm/tcp/peer_mesh.h"

#include <doctest/doctest.h>

#include <sys/socket.h>

#include <cstring>
#include <thread>

#include "common/auth.h"
#include "common/error.h"
#include "common/socket.h"
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
    threads.emplace_back([&, r] {
      meshes[r] = build_mesh(store, {r, 4, "tok", "g"}, Deadline(Millis(30'000)));
    });
  }
  for (auto& t : threads) t.join();
  for (int r = 0; r < 4; ++r) {
    for (int p = 0; p < 4; ++p) CHECK(meshes[r].fds[p].valid() == (p != r));
  }
}

namespace {

// A listening rank's port, from what it published in the store.
uint16_t port_of(rdzv::Store& store, int rank) {
  return PeerAddress::decode(store.get_string("tcp/addr/" + std::to_string(rank), Millis(30'000))).port;
}

Fd connect_to(uint16_t port) { return net::connect_tcp({"127.0.0.1", port}, Deadline(Millis(30'000))); }

void put_u32(std::string& out, uint32_t v) {
  for (int i = 0; i < 4; ++i) out.push_back(static_cast<char>((v >> (8 * i)) & 0xff));
}

}  // namespace

TEST_CASE("strangers on a rank's port during set-up delay and fail nobody") {
  rdzv::HashStore store;
  std::vector<Mesh> meshes(2);
  std::string error0, error1;  // failures are checked, not left to escape a thread
  std::thread rank0([&] {
    try {
      meshes[0] = build_mesh(store, {0, 2, "tok", "g"}, Deadline(Millis(60'000)));
    } catch (const Error& e) {
      error0 = e.message();
    }
  });
  const uint16_t port = port_of(store, 0);
  // Ahead of rank 1 in the listen queue: silent ones, one with garbage, one with half a hello.
  std::vector<Fd> strangers;
  for (int i = 0; i < 7; ++i) strangers.push_back(connect_to(port));
  strangers.push_back(connect_to(port));
  net::send_all(strangers.back().get(), "GET / HTTP/1.0\r\n\r\n", 18, Deadline(Millis(1000)), "stranger");
  strangers.push_back(connect_to(port));
  net::send_all(strangers.back().get(), "DDPTCP02", 8, Deadline(Millis(1000)), "stranger");
  // Served one at a time, the strangers would hold rank 1 back for 7 handshake timeouts, past
  // this generous deadline; served together they hold it back not at all.
  try {
    meshes[1] = build_mesh(store, {1, 2, "tok", "g"}, Deadline(Millis(30'000)));
  } catch (const Error& e) {
    error1 = e.message();
  }
  rank0.join();
  REQUIRE(error0 == "");
  REQUIRE(error1 == "");
  CHECK(meshes[0].fds[1].valid());
  CHECK(meshes[1].fds[0].valid());
}

TEST_CASE("a fake rank that does not know the token is detected and learns nothing") {
  rdzv::HashStore store;
  Fd listener = net::listen_tcp({"127.0.0.1", 0});
  PeerAddress fake = PeerAddress::local(net::local_port(listener.get()));
  fake.addrs = {"127.0.0.1"};
  store.set("tcp/addr/0", fake.encode());
  std::string heard;
  std::thread squatter([&] {
    Fd c(::accept(listener.get(), nullptr, nullptr));
    char buf[4096];
    ssize_t n = ::recv(c.get(), buf, sizeof(buf), 0);
    if (n > 0) heard.append(buf, static_cast<size_t>(n));
    auto nonce = auth::random_nonce();
    auto guess = auth::sha256("guess");
    std::string challenge(reinterpret_cast<const char*>(nonce.data()), nonce.size());
    challenge.append(reinterpret_cast<const char*>(guess.data()), guess.size());
    net::send_all(c.get(), challenge.data(), challenge.size(), Deadline(Millis(30'000)), "squatter");
    while ((n = ::recv(c.get(), buf, sizeof(buf), 0)) > 0) heard.append(buf, static_cast<size_t>(n));
  });
  std::string error;
  try {
    build_mesh(store, {1, 2, "sup3r-s3cret-t0ken", "g"}, Deadline(Millis(30'000)));
  } catch (const NetworkError& e) {
    error = e.message();
  }
  squatter.join();
  CAPTURE(error);
  CHECK(error.find("could not prove") != std::string::npos);
  CHECK(error.find("rank 0") != std::string::npos);
  CHECK_FALSE(heard.empty());
  CHECK(heard.find("sup3r-s3cret-t0ken") == std::string::npos);
}

TEST_CASE("the acceptor refuses a connector that cannot prove the token, and still gets the real one") {
  rdzv::HashStore store;
  std::vector<Mesh> meshes(2);
  // Rank 0 accepts once it has read every peer's address: give it rank 1's early.
  store.set("tcp/addr/1", PeerAddress::local(1).encode());
  std::thread rank0([&] { meshes[0] = build_mesh(store, {0, 2, "tok", "g"}, Deadline(Millis(60'000))); });
  Fd imposter = connect_to(port_of(store, 0));
  std::string hello("DDPTCP02", 8);
  put_u32(hello, 1);
  put_u32(hello, 2);
  put_u32(hello, 1);
  hello += "g";
  auto nonce = auth::random_nonce();
  hello.append(reinterpret_cast<const char*>(nonce.data()), nonce.size());
  const Deadline d(Millis(30'000));
  net::send_all(imposter.get(), hello.data(), hello.size(), d, "imposter");
  char challenge[64];
  net::recv_all(imposter.get(), challenge, sizeof(challenge), d, "imposter");
  auto proof = auth::sha256("not the token");  // it cannot make the real one
  net::send_all(imposter.get(), proof.data(), proof.size(), d, "imposter");
  char head[8];
  net::recv_all(imposter.get(), head, sizeof(head), d, "imposter");
  uint32_t status = 0, len = 0;
  std::memcpy(&status, head, 4);
  std::memcpy(&len, head + 4, 4);
  std::string message(len, '\0');
  net::recv_all(imposter.get(), message.data(), len, d, "imposter");
  CHECK(status == 1);
  CHECK(message.find("job token") != std::string::npos);
  meshes[1] = build_mesh(store, {1, 2, "tok", "g"}, Deadline(Millis(60'000)));
  rank0.join();
  CHECK(meshes[0].fds[1].valid());
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
