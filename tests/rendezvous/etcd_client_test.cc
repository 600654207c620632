// EtcdClient (and its transport, etcd_http, and EtcdWatch) against a real etcd started by the
// test, and against endpoints that are not etcd: nothing listening, our own TCPStore, a
// listener that says nothing, one that answers garbage, HTML or JSON of another kind. Every
// failure must come within the call's deadline, as an error naming the endpoint and the call.
// Authentication (a wrong password, a token that etcd forgets) and TLS (a CA that does not
// sign the member's certificate) each get an etcd of their own.
#include "rendezvous/etcd_client.h"

#include <doctest/doctest.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <fstream>
#include <functional>
#include <thread>

#include "common/error.h"
#include "common/log.h"
#include "common/socket.h"
#include "etcd_cluster.h"
#include "rendezvous/etcd_http.h"
#include "rendezvous/etcd_watch.h"
#include "rendezvous/tcp_store.h"
#include "store_fixtures.h"

using namespace ddp;
using namespace ddp::rdzv;
using namespace ddp::rdzv::testing;

namespace {

bool contains(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

Bytes b(const std::string& s) { return Store::to_bytes(s); }

EtcdClientOptions options_for(std::vector<std::string> endpoints, Millis timeout = Millis(2'000)) {
  EtcdClientOptions o;
  o.endpoints = std::move(endpoints);
  o.request_timeout = timeout;
  return o;
}

etcd::PutRequest put(const std::string& key, const std::string& value) {
  etcd::PutRequest p;
  p.key = key;
  p.value = b(value);
  return p;
}

etcd::RangeRequest key_range(const std::string& key) {
  etcd::RangeRequest r;
  r.key = key;
  return r;
}

// Runs `call`, expecting an Error; returns its message and checks the time it took.
template <typename E = Error>
std::string failure(const std::function<void()>& call, Millis within) {
  const Deadline d(within);
  try {
    call();
  } catch (const E& e) {
    MESSAGE(e.message());  // shown with -s: what a user would read
    CHECK_MESSAGE(!d.expired(), "took ", d.elapsed().count(), " ms: ", e.message());
    return e.message();
  }
  FAIL("no error");
  return "";
}

// A TCP listener on 127.0.0.1 that answers every connection with `reply` (then closes), or
// with nothing (reply "-": accepts and holds the connection; "": closes at once).
class FakeServer {
 public:
  explicit FakeServer(std::string reply) : reply_(std::move(reply)) {
    fd_ = net::listen_tcp({.host = "127.0.0.1", .port = 0, .backlog = 64, .reuse_addr = true});
    port_ = net::local_port(fd_.get());
    thread_ = std::thread([this] { serve(); });
  }
  ~FakeServer() {
    stop_ = true;
    thread_.join();
  }
  std::string endpoint() const { return "127.0.0.1:" + std::to_string(port_); }

 private:
  void serve() {
    std::vector<Fd> held;
    while (!stop_) {
      pollfd p{fd_.get(), POLLIN, 0};
      if (::poll(&p, 1, 20) <= 0) continue;
      Fd c(::accept4(fd_.get(), nullptr, nullptr, SOCK_CLOEXEC));
      if (!c) continue;
      if (reply_ == "-") {
        held.push_back(std::move(c));
        continue;
      }
      if (reply_.empty()) continue;
      char buf[4096];
      pollfd q{c.get(), POLLIN, 0};
      if (::poll(&q, 1, 1000) > 0) (void)::recv(c.get(), buf, sizeof buf, 0);  // the request
      (void)::send(c.get(), reply_.data(), reply_.size(), MSG_NOSIGNAL);
      ::shutdown(c.get(), SHUT_WR);
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
  }

  std::string reply_;
  Fd fd_;
  uint16_t port_ = 0;
  std::atomic<bool> stop_{false};
  std::thread thread_;
};

std::string http_reply(const std::string& type, const std::string& body, int status = 200) {
  return "HTTP/1.1 " + std::to_string(status) + " X\r\nContent-Type: " + type +
         "\r\nContent-Length: " + std::to_string(body.size()) + "\r\nConnection: close\r\n\r\n" + body;
}

// Runs a shell command; true on exit 0.
bool sh(const std::string& cmd) { return std::system(cmd.c_str()) == 0; }

}  // namespace

TEST_CASE("endpoints: host:port or a URL; anything else is an InvalidArgument") {
  CHECK(etcd_endpoint_url("127.0.0.1:2379", "http") == "http://127.0.0.1:2379");
  CHECK(etcd_endpoint_url("etcd-0:2379", "https") == "https://etcd-0:2379");
  CHECK(etcd_endpoint_url("https://e:2379/", "http") == "https://e:2379");
  CHECK_THROWS_AS(etcd_endpoint_url("", "http"), InvalidArgument);
  CHECK_THROWS_AS(etcd_endpoint_url("ftp://e:21", "http"), InvalidArgument);
  CHECK_THROWS_AS(etcd_endpoint_url("e:2379", "gopher"), InvalidArgument);
  CHECK_THROWS_AS(etcd_endpoint_url("http://", "http"), InvalidArgument);
  CHECK_THROWS_AS(EtcdClient(EtcdClientOptions{}), InvalidArgument);
  CHECK(etcd::prefix_end("/ddp/") == "/ddp0");
  CHECK(etcd::prefix_end(std::string("a\xff", 2)) == "b");
  CHECK(etcd::prefix_end("") == std::string(1, '\0'));
}

TEST_CASE("nothing listening on any endpoint: NetworkError within the timeout naming each one and the call") {
  const uint16_t p = net::pick_free_port(2);
  const std::string a = "127.0.0.1:" + std::to_string(p);
  const std::string c = "127.0.0.1:" + std::to_string(p + 1);
  EtcdClient client(options_for({a, c}, Millis(1'000)));
  const std::string msg = failure<NetworkError>([&] { client.put(put("/k", "v")); }, Millis(5'000));
  CHECK(contains(msg, "etcd put of key '/k'"));
  CHECK(contains(msg, a));
  CHECK(contains(msg, c));
  CHECK(contains(msg, "Connection refused"));
}

TEST_CASE("our own TCPStore's port is not etcd: a clear error within the deadline") {
  ddp::set_log_level(spdlog::level::off);  // the store server logs the frames it refuses: expected
  auto server = TcpFixture::make_server();
  EtcdClient client(options_for({"127.0.0.1:" + std::to_string(server->port())}, Millis(3'000)));
  const std::string msg = failure([&] { client.range(key_range("/k")); }, Millis(15'000));
  CHECK(contains(msg, "127.0.0.1:" + std::to_string(server->port())));
  CHECK(contains(msg, "etcd range of key '/k'"));
  // The store serves its own clients on as before.
  server->set("still", "here");
  CHECK(server->get_string("still") == "here");
  ddp::set_log_level(spdlog::level::warn);
}

TEST_CASE("a listener that accepts and never answers: an error at the deadline naming it") {
  FakeServer silent("-");
  EtcdClientOptions o = options_for({silent.endpoint()}, Millis(1'000));
  EtcdClient client(o);
  const std::string msg = failure<NetworkError>([&] { client.put(put("/k", "v")); }, Millis(5'000));
  CHECK(contains(msg, silent.endpoint()));
  CHECK(contains(msg, "no answer within"));
}

TEST_CASE("a listener that closes at once: an error at the deadline naming it") {
  FakeServer closing("");
  EtcdClient client(options_for({closing.endpoint()}, Millis(1'000)));
  const std::string msg = failure<NetworkError>([&] { client.range(key_range("/k")); }, Millis(5'000));
  CHECK(contains(msg, closing.endpoint()));
}

TEST_CASE("answers that are not etcd's: garbage, HTML, JSON of another kind, a 404") {
  struct Case {
    std::string reply;
    std::string says;
  };
  const std::vector<Case> cases = {
      {"garbage that is not HTTP at all\r\n\r\n", "not HTTP"},
      {http_reply("text/html", "<html><body>hello</body></html>"), "text/html"},
      {http_reply("text/plain", "Not Found", 404), "Not Found"},
      {http_reply("application/json", "{\"hello\": 1}"), "no 'header'"},
      {http_reply("application/json", "{\"header\": {\"revision\": \"1\"}, \"kvs\": [{\"key\": \"!!\"}]}"),
       "base64"},
      {http_reply("application/json", "{\"header\": {\"rev"), "not an answer of etcd"},
  };
  for (const auto& c : cases) {
    INFO(c.reply.substr(0, 40));
    FakeServer fake(c.reply);
    EtcdClient client(options_for({fake.endpoint()}, Millis(3'000)));
    const std::string msg = failure<StoreError>([&] { client.range(key_range("/k")); }, Millis(3'000));
    CHECK(contains(msg, fake.endpoint()));
    CHECK(contains(msg, c.says));
  }
}

TEST_CASE("fail-over: dead and foreign endpoints are skipped for a live member" *
          doctest::skip(!have_etcd())) {
  EtcdCluster& etcd = shared_etcd(1);
  const std::string dead = "127.0.0.1:" + std::to_string(net::pick_free_port());
  FakeServer html(http_reply("text/html", "<html></html>"));
  EtcdClient client(options_for({dead, html.endpoint(), etcd.endpoint(0)}, Millis(5'000)));
  const std::string k = unique_prefix("failover") + "k";
  client.put(put(k, "v"));
  const auto r = client.range(key_range(k));
  REQUIRE(r.kvs.size() == 1);
  CHECK(Store::to_string(r.kvs[0].value) == "v");
  CHECK(client.current_member() == 2);  // the next call starts where the last was answered
}

TEST_CASE("transactions compare on value, version and create_revision" * doctest::skip(!have_etcd())) {
  EtcdClient client(shared_etcd(1).client_options());
  const std::string k = unique_prefix("txn") + "k";
  auto compare = [&](etcd::CompareTarget target, int64_t number, const std::string& value) {
    etcd::TxnRequest t;
    etcd::Compare c;
    c.key = k;
    c.target = target;
    c.number = number;
    c.value = b(value);
    t.compare.push_back(c);
    t.success.emplace_back(put(k, "then"));
    t.failure.emplace_back(key_range(k));
    return client.txn(t);
  };
  CHECK(compare(etcd::CompareTarget::kCreateRevision, 0, "").succeeded);  // missing: created
  CHECK_FALSE(compare(etcd::CompareTarget::kCreateRevision, 0, "").succeeded);
  CHECK(compare(etcd::CompareTarget::kValue, 0, "then").succeeded);
  const auto failed = compare(etcd::CompareTarget::kValue, 0, "other");
  CHECK_FALSE(failed.succeeded);
  REQUIRE(failed.responses.size() == 1);
  CHECK(failed.responses[0].range.kvs.at(0).version == 2);
  CHECK(compare(etcd::CompareTarget::kVersion, 2, "").succeeded);
  etcd::DeleteRangeRequest d;
  d.key = k;
  CHECK(client.delete_range(d).deleted == 1);
  CHECK(client.delete_range(d).deleted == 0);
}

TEST_CASE("leases: grant, keep-alive, revoke; a revoked lease is gone" * doctest::skip(!have_etcd())) {
  EtcdClient client(shared_etcd(1).client_options());
  const auto lease = client.grant_lease(30);
  CHECK(lease.ttl == 30);
  CHECK(client.keep_alive(lease.id) > 0);
  const std::string k = unique_prefix("lease") + "k";
  etcd::PutRequest p = put(k, "alive");
  p.lease = lease.id;
  client.put(p);
  CHECK(client.range(key_range(k)).kvs.at(0).lease == lease.id);
  CHECK(client.revoke(lease.id));
  CHECK(client.range(key_range(k)).kvs.empty());  // revoking deleted the key
  CHECK(client.keep_alive(lease.id) == 0);
  CHECK_FALSE(client.revoke(lease.id));
  CHECK_THROWS_AS(client.grant_lease(0), InvalidArgument);
  p.lease = lease.id;  // putting under a lease that is gone: etcd's refusal, named
  const std::string msg = failure<StoreError>([&] { client.put(p); }, Millis(10'000));
  CHECK(contains(msg, "lease not found"));
}

TEST_CASE("watch: events from a revision, in order; deadline; cancel from another thread" *
          doctest::skip(!have_etcd())) {
  auto client = std::make_shared<EtcdClient>(shared_etcd(1).client_options());
  const std::string prefix = unique_prefix("watch");
  const auto first = client->put(put(prefix + "a", "1"));
  client->put(put(prefix + "b", "2"));
  etcd::DeleteRangeRequest d;
  d.key = prefix + "a";
  client->delete_range(d);
  EtcdWatchRequest request;
  request.key = prefix;
  request.range_end = etcd::prefix_end(prefix);
  request.start_revision = first.header.revision;  // history: all three changes
  request.strip_prefix = prefix;
  EtcdWatch watch(client, request);
  std::vector<etcd::Event> seen;
  const Deadline d10(Millis(10'000));
  while (seen.size() < 3 && !d10.expired()) {
    for (auto& e : watch.next(d10).events) seen.push_back(e);
  }
  REQUIRE(seen.size() == 3);
  CHECK(seen[0].kv.key == "a");
  CHECK(seen[1].kv.key == "b");
  CHECK(seen[2].type == etcd::Event::Type::kDelete);
  CHECK(seen[2].kv.key == "a");
  // Nothing more: the deadline ends next() with no events.
  const Deadline short_wait(Millis(200));
  CHECK(watch.next(short_wait).events.empty());
  CHECK(short_wait.expired());
  // cancel() from another thread ends a blocked next() at once.
  std::thread canceller([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    watch.cancel();
  });
  const std::string msg = failure<NetworkError>([&] { watch.next(Deadline(Millis(30'000))); }, Millis(5'000));
  canceller.join();
  CHECK(contains(msg, "cancelled"));
  CHECK_THROWS_AS(watch.next(Deadline(Millis(30'000))), NetworkError);  // and stays cancelled
}

TEST_CASE("authentication: the right password works, a wrong one is an error naming the user and member" *
          doctest::skip(!have_etcd())) {
  EtcdCluster etcd;
  REQUIRE(etcd.etcdctl("user add root:secret-pw") == 0);
  REQUIRE(etcd.etcdctl("user grant-role root root") == 0);
  REQUIRE(etcd.etcdctl("auth enable") == 0);
  EtcdClientOptions o = etcd.client_options();
  o.request_timeout = Millis(5'000);
  {
    // No user: etcd says so, and we say how to give one.
    EtcdClient anonymous(o);
    const std::string msg = failure<StoreError>([&] { anonymous.range(key_range("/k")); }, Millis(5'000));
    CHECK(contains(msg, "user name is empty"));
    CHECK(contains(msg, "DDP_ETCD_USER"));
  }
  {
    o.user = "root";
    o.password = "wrong";
    EtcdClient wrong(o);
    const std::string msg = failure<StoreError>([&] { wrong.put(put("/k", "v")); }, Millis(5'000));
    CHECK(contains(msg, "user 'root'"));
    CHECK(contains(msg, etcd.endpoint(0)));
    CHECK(contains(msg, "authentication failed"));
  }
  o.password = "secret-pw";
  auto client = std::make_shared<EtcdClient>(o);
  client->put(put("/auth/k", "v"));
  CHECK(client->range(key_range("/auth/k")).kvs.size() == 1);
  // etcd forgets its tokens when it restarts: the client authenticates again, once, unseen.
  etcd.kill(0);
  etcd.restart(0);
  CHECK(client->range(key_range("/auth/k")).kvs.size() == 1);
  // So does a watch opened with the old token.
  etcd.kill(0);
  etcd.restart(0);
  EtcdWatchRequest request;
  request.key = "/auth/w";
  // From the revision after a read by another client (this one keeps its old token): the put below
  // is seen however late the watch is created on a loaded machine.
  request.start_revision = EtcdClient(o).range(key_range("/auth/k")).header.revision + 1;
  EtcdWatch watch(client, request);
  CHECK(watch.next(Deadline(Millis(300))).events.empty());  // nothing yet
  client->put(put("/auth/w", "x"));
  CHECK(watch.next(Deadline(Millis(10'000))).events.size() == 1);
}

TEST_CASE("TLS: certificates made by the test; a CA that did not sign the member's is an error naming it" *
          doctest::skip(!have_etcd() || ::access("/usr/bin/openssl", X_OK) != 0)) {
  TempDir dir;
  const std::string d = dir.path();
  // A CA, a member certificate for 127.0.0.1 signed by it (also good for client authentication),
  // and a second CA that signed nothing here.
  std::ofstream(d + "/ext.cnf") << "subjectAltName=IP:127.0.0.1\nextendedKeyUsage=serverAuth,clientAuth\n";
  const std::string ec = " -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes ";
  REQUIRE(sh("cd " + d + " && openssl req -x509" + ec +
             "-keyout ca.key -out ca.pem -days 2 -subj /CN=ddp-test-ca 2>/dev/null"));
  REQUIRE(sh("cd " + d + " && openssl req" + ec +
             "-keyout member.key -out member.csr -subj /CN=127.0.0.1 2>/dev/null"));
  REQUIRE(sh("cd " + d + " && openssl x509 -req -in member.csr -CA ca.pem -CAkey ca.key -CAcreateserial " +
             "-out member.pem -days 2 -extfile ext.cnf 2>/dev/null"));
  REQUIRE(sh("cd " + d + " && openssl req -x509" + ec +
             "-keyout other.key -out other.pem -days 2 -subj /CN=other-ca 2>/dev/null"));
  EtcdClusterOptions co;
  co.scheme = "https";
  co.cert = d + "/member.pem";
  co.key = d + "/member.key";
  co.trusted_ca = d + "/ca.pem";
  co.client_cert_auth = true;
  EtcdCluster etcd(co);
  EtcdClientOptions o = etcd.client_options();
  o.request_timeout = Millis(3'000);
  {
    EtcdClient good(o);
    good.put(put("/tls/k", "v"));
    CHECK(good.range(key_range("/tls/k")).kvs.size() == 1);
  }
  {
    EtcdClientOptions w = o;
    w.cacert = d + "/other.pem";
    EtcdClient wrong(w);
    const std::string msg = failure<StoreError>([&] { wrong.range(key_range("/tls/k")); }, Millis(3'000));
    CHECK(contains(msg, d + "/other.pem"));
    CHECK(contains(msg, etcd.endpoint(0)));
  }
  {
    EtcdClientOptions m = o;
    m.cacert = d + "/no-such-ca.pem";
    EtcdClient missing(m);
    CHECK(
        contains(failure([&] { missing.range(key_range("/tls/k")); }, Millis(3'000)), d + "/no-such-ca.pem"));
  }
  {
    EtcdClientOptions n = o;  // the member asks for a client certificate; none is given
    n.cert.clear();
    n.key.clear();
    EtcdClient no_cert(n);
    CHECK(contains(failure([&] { no_cert.range(key_range("/tls/k")); }, Millis(5'000)), etcd.endpoint(0)));
  }
  {
    EtcdClientOptions h = o;  // plain http to a TLS member
    h.protocol = "http";
    EtcdClient plain(h);
    CHECK(contains(failure([&] { plain.range(key_range("/tls/k")); }, Millis(5'000)), etcd.endpoint(0)));
  }
}
