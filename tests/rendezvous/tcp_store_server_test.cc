// TCPStoreServer under bad input and load: garbage frames, vanishing clients, cancelled waits,
// a thousand concurrent clients. After every abuse a normal client must still work and find
// its data intact.
#include "rendezvous/tcp_store_server.h"

#include <doctest/doctest.h>

#include <random>
#include <thread>

#include <sys/resource.h>
#include "common/error.h"

#include "process.h"
#include "raw_client.h"
#include "rendezvous/tcp_store.h"

using namespace ddp;
using namespace ddp::rdzv;
using namespace ddp::rdzv::testing;
using proto::MsgType;
using proto::Writer;

namespace {

constexpr Millis kLong{30'000};

template <typename F>
bool eventually(F done) {  // bounded wait for what the server does on its own thread
  Deadline d(kLong);
  while (!done()) {
    if (d.expired()) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  return true;
}

std::unique_ptr<TCPStore> client_of(uint16_t port, const std::string& token = "t0k3n") {
  TCPStoreOptions o;
  o.port = port;
  o.timeout = kLong;
  o.connect_timeout = kLong;
  o.job_token = token;
  return std::make_unique<TCPStore>(o);
}

struct Server {
  TCPStoreServer server{TCPStoreServerOptions{"127.0.0.1", 0, "t0k3n"}};
  std::unique_ptr<TCPStore> good = client_of(server.port());
  Server() { good->set("precious", "data"); }
  // The server survived and kept other clients' data.
  void check_intact() {
    CHECK(good->get_string("precious", kLong) == "data");
    auto fresh = client_of(server.port());
    fresh->set("fresh", "ok");
    CHECK(good->get_string("fresh", kLong) == "ok");
    CHECK(fresh->get_string("precious", kLong) == "data");
  }
};

}  // namespace

TEST_CASE("garbage frames close only that connection: before or at the handshake") {
  Server s;
  std::mt19937 rng(1234);
  SUBCASE("random bytes before the handshake") {
    RawClient raw(s.server.port());
    std::vector<uint8_t> junk(4096);
    for (auto& b : junk) b = static_cast<uint8_t>(rng());
    junk[0] = 0xff;  // a length far over the pre-handshake limit
    junk[3] = 0x7f;
    raw.send_bytes(junk.data(), junk.size());
    CHECK(raw.closed_by_server());
  }
  SUBCASE("zero length") {
    RawClient raw(s.server.port());
    uint8_t header[4] = {0, 0, 0, 0};
    raw.send_bytes(header, sizeof(header));
    CHECK(raw.closed_by_server());
  }
  SUBCASE("bad magic") {
    RawClient raw(s.server.port());
    Writer w(MsgType::kHello);
    w.u32(0xdeadbeef).u16(proto::kVersion).bytes(std::vector<uint8_t>(32));
    raw.send_frame(w);
    CHECK(raw.closed_by_server());
  }
  SUBCASE("a request before the handshake") {
    RawClient raw(s.server.port());
    Writer w(MsgType::kSet);
    w.str("precious").str("stolen");
    raw.send_frame(w);
    CHECK(raw.closed_by_server());
  }
  SUBCASE("wrong protocol version gets a clear error") {
    RawClient raw(s.server.port());
    raw.hello("t0k3n", proto::kVersion + 7);
    auto reply = raw.read_frame();
    REQUIRE(reply);
    CHECK(static_cast<MsgType>((*reply)[0]) == MsgType::kError);
    CHECK(static_cast<proto::ErrorCode>((*reply)[1]) == proto::ErrorCode::kBadVersion);
    CHECK(raw.closed_by_server());
  }
  s.check_intact();
}

TEST_CASE("garbage frames close only that connection: malformed frames after the handshake") {
  Server s;
  std::mt19937 rng(1234);
  SUBCASE("random frames after the handshake") {
    for (int round = 0; round < 20; ++round) {
      RawClient raw(s.server.port());
      raw.hello("t0k3n");
      REQUIRE(raw.read_frame());
      std::vector<uint8_t> frame(4 + 1 + rng() % 64);
      for (auto& b : frame) b = static_cast<uint8_t>(rng());
      uint32_t len = static_cast<uint32_t>(frame.size() - 4);
      for (int i = 0; i < 4; ++i) frame[i] = static_cast<uint8_t>(len >> (8 * i));
      raw.send_bytes(frame.data(), frame.size());
      // Either a reply (the bytes happened to be a valid request) or a close; never a crash.
      raw.read_frame(Millis(200)).has_value();
    }
  }
  SUBCASE("oversize length after the handshake") {
    RawClient raw(s.server.port());
    raw.hello("t0k3n");
    REQUIRE(raw.read_frame());
    uint8_t header[5] = {0xff, 0xff, 0xff, 0xff, 2};
    raw.send_bytes(header, sizeof(header));
    CHECK(raw.closed_by_server());
  }
  SUBCASE("a field longer than its frame (truncated inside the frame)") {
    RawClient raw(s.server.port());
    raw.hello("t0k3n");
    REQUIRE(raw.read_frame());
    Writer w(MsgType::kSet);
    w.u32(1000).u8('k');  // key length 1000, one byte present
    raw.send_frame(w);
    CHECK(raw.closed_by_server());
  }
  SUBCASE("truncated frame, then the client vanishes") {
    RawClient raw(s.server.port());
    raw.hello("t0k3n");
    REQUIRE(raw.read_frame());
    Writer w(MsgType::kSet);
    w.str("precious").str("overwritten?");
    const auto& f = w.finish();
    raw.send_bytes(f.data(), f.size() - 5);
  }  // closed here, mid-frame
  s.check_intact();
}

TEST_CASE("garbage frames close only that connection: bad requests after the handshake") {
  Server s;
  SUBCASE("unknown request type and trailing bytes") {
    RawClient a(s.server.port());
    a.hello("t0k3n");
    REQUIRE(a.read_frame());
    Writer w(static_cast<MsgType>(77));
    a.send_frame(w);
    CHECK(a.closed_by_server());
    RawClient b(s.server.port());
    b.hello("t0k3n");
    REQUIRE(b.read_frame());
    Writer n(MsgType::kNumKeys);
    n.u32(5);
    b.send_frame(n);
    CHECK(b.closed_by_server());
  }
  SUBCASE("a second request while a wait is pending") {
    RawClient raw(s.server.port());
    raw.hello("t0k3n");
    REQUIRE(raw.read_frame());
    Writer wait(MsgType::kWait);
    wait.strs({"nobody-sets-this"});
    raw.send_frame(wait);
    Writer set(MsgType::kSet);
    set.str("precious").str("clobbered");
    raw.send_frame(set);
    CHECK(raw.closed_by_server());
  }
  s.check_intact();
}

TEST_CASE("a cancelled wait is dropped by the server") {
  Server s;
  CHECK_THROWS_AS(s.good->get("missing", Millis(50)), TimeoutError);
  CHECK(s.server.num_waiting() == 0);
  // The connection stays usable after a cancelled wait.
  s.good->set("after", "cancel");
  CHECK(s.good->get_string("after", kLong) == "cancel");
  // A raw client that parks a wait and vanishes does not leave a waiter behind: a later set
  // of the key must not trip over it.
  {
    RawClient raw(s.server.port());
    raw.hello("t0k3n");
    REQUIRE(raw.read_frame());
    Writer w(MsgType::kGet);
    w.str("ghost");
    raw.send_frame(w);
    // Make sure the server parked it before we vanish: a cancel is answered with TimedOut.
    Writer cancel(MsgType::kCancel);
    raw.send_frame(cancel);
    auto reply = raw.read_frame();
    REQUIRE(reply);
    CHECK(static_cast<MsgType>((*reply)[0]) == MsgType::kTimedOut);
    raw.send_frame(w);  // park again and vanish
  }
  s.good->set("ghost", "boo");
  CHECK(s.good->get_string("ghost", kLong) == "boo");
  s.check_intact();
}

TEST_CASE("pipelined requests beyond the reply high-water mark are all answered") {
  Server s;
  Bytes big(1 << 20, 'b');
  s.good->set("big", big);
  RawClient raw(s.server.port());
  raw.hello("t0k3n");
  REQUIRE(raw.read_frame());
  constexpr int kRequests = 24;  // 24 MB of replies, far above the 4 MB high-water mark
  std::vector<uint8_t> burst;
  for (int i = 0; i < kRequests; ++i) {
    Writer w(MsgType::kGet);
    w.str("big");
    const auto& f = w.finish();
    burst.insert(burst.end(), f.begin(), f.end());
  }
  raw.send_bytes(burst.data(), burst.size());
  for (int i = 0; i < kRequests; ++i) {
    auto reply = raw.read_frame();
    REQUIRE(reply);
    proto::Reader rd(reply->data() + 1, reply->size() - 1);
    CHECK(rd.bytes(kMaxValueSize) == big);
  }
  s.check_intact();
}

TEST_CASE("1000 concurrent clients: connect, add, and all woken by one set") {
  constexpr int kClients = 1000;
  Server s;
  std::vector<std::unique_ptr<RawClient>> raws(kClients);
  constexpr int kThreads = 4;
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      for (int i = t; i < kClients; i += kThreads) {
        raws[i] = std::make_unique<RawClient>(s.server.port());
        raws[i]->hello("t0k3n");
      }
    });
  }
  for (auto& t : threads) t.join();
  for (auto& r : raws) REQUIRE(r->read_frame());
  // Every client counts itself in, then parks a get on the same key.
  for (auto& r : raws) {
    Writer w(MsgType::kAdd);
    w.str("arrived").i64(1);
    r->send_frame(w);
  }
  for (auto& r : raws) REQUIRE(r->read_frame());
  CHECK(s.good->get_string("arrived", kLong) == std::to_string(kClients));
  CHECK(s.server.num_connections() >= kClients + 1);
  for (auto& r : raws) {
    Writer w(MsgType::kGet);
    w.str("go");
    r->send_frame(w);
  }
  s.good->set("go", "now");
  int woken = 0;
  for (auto& r : raws) {
    auto reply = r->read_frame();
    REQUIRE(reply);
    proto::Reader rd(reply->data() + 1, reply->size() - 1);
    if (static_cast<MsgType>((*reply)[0]) == MsgType::kOk && rd.str(16) == "now") ++woken;
  }
  CHECK(woken == kClients);
  CHECK(s.server.num_waiting() == 0);
  s.check_intact();
}

TEST_CASE("a client that proves the wrong token is refused by the server") {
  Server s;
  RawClient raw(s.server.port());
  raw.hello("not-the-token");  // the server's proof does not convince it, but it answers anyway
  auto reply = raw.read_frame();
  REQUIRE(reply);
  CHECK(static_cast<MsgType>((*reply)[0]) == MsgType::kError);
  CHECK(static_cast<proto::ErrorCode>((*reply)[1]) == proto::ErrorCode::kRefused);
  CHECK(raw.closed_by_server());
  s.check_intact();
}

TEST_CASE("a silent stranger is dropped at the handshake deadline") {
  TCPStoreServerOptions o{"127.0.0.1", 0, "t0k3n"};
  o.handshake_timeout = Millis(200);
  TCPStoreServer server(o);
  RawClient silent(server.port());
  CHECK(silent.closed_by_server());
  RawClient half(server.port());
  half.send_hello();  // starts, never proves
  CHECK(half.closed_by_server());
  CHECK(eventually([&] { return server.stats().connections == 0; }));
}

TEST_CASE("a thousand silent and one-byte strangers: real clients still served, memory given back") {
  TCPStoreServerOptions o{"127.0.0.1", 0, "t0k3n"};
  o.max_unauthenticated = 64;
  TCPStoreServer server(o);
  std::vector<std::unique_ptr<RawClient>> strangers;
  for (int i = 0; i < 1000; ++i) {
    strangers.push_back(std::make_unique<RawClient>(server.port()));
    if (i % 2) strangers.back()->send_bytes("x", 1);
  }
  // Accepted after every stranger (one listen queue): by now the cap has been applied to them.
  auto good = client_of(server.port());
  good->set("k", "v");
  CHECK(good->get_string("k", kLong) == "v");
  auto st = server.stats();
  CHECK(st.unauthenticated <= 64);
  CHECK(st.connections <= 64 + 1);
  CHECK(st.buffered_bytes < (1u << 20));  // was 64 KiB per stranger
  strangers.clear();
  CHECK(eventually([&] { return server.stats().connections == 1; }));
  CHECK(server.stats().unauthenticated == 0);
  CHECK(server.stats().buffered_bytes < (256u << 10));
  auto fresh = client_of(server.port());
  CHECK(fresh->get_string("k", kLong) == "v");
}

TEST_CASE("raise_fd_limit reaches the hard limit") {
  rlimit rl{};
  ::getrlimit(RLIMIT_NOFILE, &rl);
  CHECK(raise_fd_limit() == rl.rlim_max);
}

TEST_CASE("out of descriptors: the server pauses accepting and recovers") {
  Pipe port_pipe;
  // A server process that may hold only a few descriptors.
  Child server_proc([&] {
    TCPStoreServer server({"127.0.0.1", 0, "t0k3n"});
    rlimit tight{32, 32};
    if (::setrlimit(RLIMIT_NOFILE, &tight) != 0) return 3;
    port_pipe.write_u32(server.port());
    ::pause();
    return 0;
  });
  auto port = static_cast<uint16_t>(port_pipe.read_u32());
  REQUIRE(port != 0);
  constexpr int kClients = 60;  // more than the server can hold at once
  std::vector<std::unique_ptr<RawClient>> raws;
  for (int i = 0; i < kClients; ++i) {
    raws.push_back(std::make_unique<RawClient>(port));
    raws.back()->send_hello();
  }
  // Free the server's descriptors by leaving with most clients; the rest must then be served.
  raws.erase(raws.begin(), raws.begin() + 50);
  for (auto& r : raws) {
    r->finish_hello("t0k3n");
    auto reply = r->read_frame();
    REQUIRE(reply);
    CHECK(static_cast<MsgType>((*reply)[0]) == MsgType::kOk);
  }
  auto good = client_of(port);
  good->set("still", "serving");
  CHECK(good->get_string("still", kLong) == "serving");
}

TEST_CASE("out of descriptors because of strangers: the oldest stranger makes room for a real client") {
  Pipe port_pipe;
  Child server_proc([&] {
    TCPStoreServerOptions o{"127.0.0.1", 0, "t0k3n"};
    o.handshake_timeout = Millis(600'000);  // no help from the deadline: eviction alone
    TCPStoreServer server(o);
    rlimit tight{32, 32};
    if (::setrlimit(RLIMIT_NOFILE, &tight) != 0) return 3;
    port_pipe.write_u32(server.port());
    ::pause();
    return 0;
  });
  auto port = static_cast<uint16_t>(port_pipe.read_u32());
  REQUIRE(port != 0);
  // More silent strangers than the server has descriptors; none of them ever leaves.
  std::vector<std::unique_ptr<RawClient>> strangers;
  for (int i = 0; i < 60; ++i) strangers.push_back(std::make_unique<RawClient>(port));
  auto good = client_of(port);
  good->set("still", "serving");
  CHECK(good->get_string("still", kLong) == "serving");
}

TEST_CASE("the server counts the requests it answers: not handshakes, not a Cancel") {
  TCPStoreServer server{TCPStoreServerOptions{"127.0.0.1", 0, "t0k3n"}};
  auto c = client_of(server.port());
  CHECK(server.stats().requests == 0);  // the handshake is not a request
  c->set("k", "v");
  CHECK(c->add("n", 1) == 1);
  CHECK(c->check({"k"}));
  CHECK_THROWS_AS(c->get("missing", Millis(50)), TimeoutError);  // the get, parked; its Cancel: no
  CHECK(eventually([&] { return server.stats().requests == 4; }));
  c->set("k", "w");
  CHECK(eventually([&] { return server.stats().requests == 5; }));
}

TEST_CASE("the server counts the bytes it reads and writes, handshake included") {
  TCPStoreServer server{TCPStoreServerOptions{"127.0.0.1", 0, "t0k3n"}};
  auto c = client_of(server.port());
  const auto after_handshake = server.stats();
  CHECK(after_handshake.bytes_in > 0);
  CHECK(after_handshake.bytes_out > 0);
  const std::string big(10000, 'x');
  c->set("k", big);  // the request carries the value
  CHECK(eventually([&] { return server.stats().bytes_in >= after_handshake.bytes_in + big.size(); }));
  const uint64_t out_before = server.stats().bytes_out;
  CHECK(c->get_string("k", kLong) == big);  // the reply carries it
  CHECK(eventually([&] { return server.stats().bytes_out >= out_before + big.size(); }));
}
