// DDP_STORE's syntax (rendezvous/store_url.h): a TCP endpoint, or etcd members and a prefix;
// formatting and parsing agree; malformed values name DDP_STORE.
#include "rendezvous/store_url.h"

#include <doctest/doctest.h>

#include <cstdlib>

#include "common/error.h"

using namespace ddp;
using namespace ddp::rdzv;

TEST_CASE("host:port is a TCP store") {
  const StoreUrl u = parse_store_url("10.0.0.1:29400");
  CHECK(u.kind == StoreUrl::Kind::kTcp);
  CHECK(u.tcp.host == "10.0.0.1");
  CHECK(u.tcp.port == 29400);
  CHECK(parse_store_url("[::1]:5").tcp.host == "::1");
}

TEST_CASE("etcd:// and etcd+https:// name the members and the prefix") {
  const StoreUrl u = parse_store_url("etcd://h1:2379,h2,[::1]:2380/ddp");
  CHECK(u.kind == StoreUrl::Kind::kEtcd);
  CHECK(u.etcd_endpoints == std::vector<std::string>{"h1:2379", "h2:2379", "[::1]:2380"});
  CHECK(u.prefix == "/ddp/");
  CHECK(u.protocol == "http");
  const StoreUrl s = parse_store_url("etcd+https://h1:2379/team/a/");
  CHECK(s.protocol == "https");
  CHECK(s.prefix == "/team/a/");
}

TEST_CASE("etcd_store_url and parse_store_url agree") {
  const std::string url = etcd_store_url({"h1:2379", "http://h2:2380"}, "http", "/ddp/");
  CHECK(url == "etcd://h1:2379,h2:2380/ddp/");
  const StoreUrl u = parse_store_url(url);
  CHECK(u.etcd_endpoints == std::vector<std::string>{"h1:2379", "h2:2380"});
  CHECK(etcd_store_url({"https://h1:2379"}, "http", "/x") == "etcd+https://h1:2379/x/");
  CHECK(parse_store_url(etcd_store_url({"h"}, "https", "/p/")).protocol == "https");
}

TEST_CASE("the client options carry the TLS files from the environment") {
  ::setenv("DDP_ETCD_CACERT", "/ca.pem", 1);
  const EtcdClientOptions o = etcd_client_options(parse_store_url("etcd+https://h1/ddp/"));
  ::unsetenv("DDP_ETCD_CACERT");
  CHECK(o.endpoints == std::vector<std::string>{"h1:2379"});
  CHECK(o.protocol == "https");
  CHECK(o.cacert == "/ca.pem");
  CHECK(o.cert.empty());
}

TEST_CASE("malformed values are errors naming DDP_STORE") {
  for (const char* bad : {"etcd://h1:2379", "etcd://h1:2379/", "etcd://,h2/ddp", "etcd://h1:99999/ddp",
                          "http://h1:2379", "h1", "h1:0", ""}) {
    CAPTURE(bad);
    CHECK_THROWS_WITH_AS(parse_store_url(bad), doctest::Contains("DDP_STORE="), InvalidArgument);
  }
}
