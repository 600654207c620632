#include "rendezvous/init_method.h"

#include <doctest/doctest.h>

#include "common/error.h"

using namespace ddp;
using namespace ddp::rdzv;

namespace {

// The InvalidArgument message for a URL, or "" when it parses.
std::string error_of(const std::string& url) {
  try {
    parse_init_method(url);
  } catch (const InvalidArgument& e) {
    return e.message();
  }
  return "";
}

bool contains(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

}  // namespace

TEST_CASE("env://") {
  auto m = parse_init_method("env://");
  CHECK(m.scheme == InitScheme::kEnv);
  CHECK(m.url == "env://");
  CHECK_FALSE(m.rank);
  auto q = parse_init_method("env://?rank=1&world_size=2");
  CHECK(q.rank == 1);
  CHECK(q.world_size == 2);
  CHECK(contains(error_of("env://somehost"), "takes no host"));
}

TEST_CASE("file:///path") {
  auto m = parse_init_method("file:///tmp/job%201/store?rank=0&world_size=4");
  CHECK(m.scheme == InitScheme::kFile);
  CHECK(m.path == "/tmp/job 1/store");
  CHECK(m.rank == 0);
  CHECK(m.world_size == 4);
  CHECK(parse_init_method("file://localhost/var/x").path == "/var/x");
  CHECK(contains(error_of("file://relative/path"), "absolute path"));
  CHECK(contains(error_of("file:///tmp/dir/"), "directory"));
  CHECK(contains(error_of("file:///tmp/%zz"), "percent escape"));
}

TEST_CASE("tcp://host:port with rank and world_size") {
  auto m = parse_init_method("tcp://10.1.2.3:23456?rank=3&world_size=8");
  CHECK(m.scheme == InitScheme::kTcp);
  CHECK(m.host == "10.1.2.3");
  CHECK(m.port == 23456);
  CHECK(m.rank == 3);
  CHECK(m.world_size == 8);
  CHECK(m.params.at("rank") == "3");
  auto v6 = parse_init_method("tcp://[::1]:29500");
  CHECK(v6.host == "::1");
  CHECK(v6.port == 29500);
  auto name = parse_init_method("tcp://node-7.cluster:1234/?timeout=30");
  CHECK(name.host == "node-7.cluster");
  CHECK(name.params.at("timeout") == "30");
}

TEST_CASE("tcp:// errors name the URL and the problem") {
  std::string e = error_of("tcp://host");
  CHECK(contains(e, "'tcp://host'"));
  CHECK(contains(e, "missing port"));
  CHECK(contains(error_of("tcp://host:99999"), "99999"));
  CHECK(contains(error_of("tcp://host:0"), "port 0"));
  CHECK(contains(error_of("tcp://:80"), "empty host"));
  CHECK(contains(error_of("tcp://"), "missing host:port"));
  CHECK(contains(error_of("tcp://::1:80"), "brackets"));
  CHECK(contains(error_of("tcp://[::1]"), "missing port"));
  CHECK(contains(error_of("tcp://h:1/path"), "no path"));
  CHECK(contains(error_of("tcp://h:1?rank=x"), "rank='x' is not an integer"));
  CHECK(contains(error_of("tcp://h:1?rank=-1"), "must be >= 0"));
  CHECK(contains(error_of("tcp://h:1?world_size=0"), "must be >= 1"));
  CHECK(contains(error_of("tcp://h:1?rank=4&world_size=4"), "not below world_size"));
  CHECK(contains(error_of("tcp://h:1?rank=1&rank=2"), "given twice"));
  CHECK(contains(error_of("tcp://h:1?novalue"), "not name=value"));
  CHECK(contains(error_of("tcp://user@h:1"), "user info"));
}

TEST_CASE("multicast groups are recognised and rejected clearly") {
  std::string e = error_of("tcp://[ff02::1:3]:29500?group_name=job");
  CHECK(contains(e, "multicast rendezvous is not supported yet"));
  CHECK(contains(e, "ff02::1:3"));
  CHECK(contains(error_of("tcp://239.255.0.1:29500?group_name=job"), "multicast rendezvous is not supported yet"));
  CHECK(contains(error_of("tcp://224.0.0.1:1"), "multicast"));
  CHECK(is_multicast_address("239.1.2.3"));
  CHECK(is_multicast_address("ff05::2"));
  CHECK_FALSE(is_multicast_address("223.255.255.255"));
  CHECK_FALSE(is_multicast_address("240.0.0.1"));
  CHECK_FALSE(is_multicast_address("fe80::1"));
  CHECK_FALSE(is_multicast_address("localhost"));
}

TEST_CASE("unknown schemes and shapes") {
  CHECK(contains(error_of("udp://h:1"), "unknown scheme 'udp'"));
  CHECK(contains(error_of("localhost:29500"), "expected scheme://"));
  CHECK(contains(error_of(""), "expected scheme://"));
  CHECK(contains(error_of("tcp://h:1#frag"), "fragments"));
}
