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

TEST_CASE("multicast groups: discovery with group_name, ttl, interface, timeout") {
  auto v6 = parse_init_method("tcp://[ff15::1:3]:29500?group_name=job&world_size=4");
  CHECK(v6.multicast);
  CHECK(v6.host == "ff15::1:3");
  CHECK(v6.group_name == "job");
  CHECK(v6.world_size == 4);
  CHECK(v6.ttl == 1);
  CHECK_FALSE(v6.rank);
  auto v4 = parse_init_method("tcp://239.255.0.1:29500?ttl=2&interface=eth1&timeout=5&rank=1");
  CHECK(v4.multicast);
  CHECK(v4.group_name == "default");
  CHECK(v4.ttl == 2);
  CHECK(v4.interface == "eth1");
  CHECK(v4.timeout_s == 5);
  CHECK(v4.rank == 1);
  CHECK_FALSE(parse_init_method("tcp://10.0.0.1:29500").multicast);
  CHECK(contains(error_of("tcp://239.1.1.1:1?ttl=256"), "must be <= 255"));
  CHECK(contains(error_of("tcp://239.1.1.1:1?ttl=0"), "must be >= 1"));
  CHECK(contains(error_of("tcp://239.1.1.1:1?group_name="), "group_name"));
  CHECK(contains(error_of("tcp://239.1.1.1:1?timeout=x"), "not an integer"));
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
