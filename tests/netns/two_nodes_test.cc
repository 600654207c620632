// Two nodes in two network namespaces (root only): each ddp-launch runs under `ip netns exec`,
// they see each other only through a veth pair (10.77.0.1 <-> 10.77.0.2), so a launcher that
// used a loopback address or this host's name for the other node would fail here. Static and
// dynamic (tcp) rendezvous; the workers are ddp_store_probe (a real DDP_STORE client).
// Skipped when not root or iproute2 is missing: every case skips, the binary exits 77 and ctest
// reports Skipped (test_main.cc).
#include <doctest/doctest.h>

#include <memory>
#include <set>

#include "cli/launch_test_util.h"
#include "netns/netns_pair.h"

using namespace ddp::test;

namespace {

bool can_run() { return can_use_netns(); }

std::vector<std::string> in_ns(const std::string& ns, std::vector<std::string> args) {
  std::vector<std::string> out = {"ip", "netns", "exec", ns, launcher_path()};
  out.insert(out.end(), args.begin(), args.end());
  return out;
}

std::string worker(const ScratchDir& d) {
  return "env > " + d.path() + "/env.$RANK && exec " + bin_dir() + "/../tests/ddp_store_probe";
}

}  // namespace

TEST_CASE("netns: static rendezvous, node 0 at 10.77.0.1" * doctest::skip(!can_run())) {
  NetnsPair ns;
  REQUIRE(ns.ok());
  ScratchDir d;
  auto common = std::vector<std::string>{"--nnodes",         "2",
                                         "--nproc-per-node", "2",
                                         "--master-addr",    "10.77.0.1",
                                         "--master-port",    "29500",
                                         "--rdzv-id",        unique_id("ns-static"),
                                         "--rdzv-conf",      "timeout=60"};
  auto a = common, b = common;
  for (auto* v : {&a, &b}) v->insert(v->end(), {"--node-rank", v == &a ? "0" : "1", "sh", "-c", worker(d)});
  Child n0(in_ns(ns.a(), a), {}, d / "n0.out", d / "n0.err");
  Child n1(in_ns(ns.b(), b), {}, d / "n1.out", d / "n1.err");
  CHECK(n0.wait() == 0);
  CHECK(n1.wait() == 0);
  INFO(slurp(d / "n0.err"), slurp(d / "n1.err"));
  for (int rank = 0; rank < 4; ++rank) {
    auto e = parse_env_dump(slurp(d / ("env." + std::to_string(rank))));
    CHECK(e["MASTER_ADDR"] == "10.77.0.1");
    CHECK(e["DDP_STORE"] == "10.77.0.1:29501");
    CHECK(e["WORLD_SIZE"] == "4");
  }
  CHECK(slurp(d / "n1.out").find("all 4 ranks met") != std::string::npos);
}

TEST_CASE("netns: tcp rendezvous, the launcher at the endpoint hosts, ranks by arrival" *
          doctest::skip(!can_run())) {
  NetnsPair ns;
  REQUIRE(ns.ok());
  ScratchDir d;
  auto args = std::vector<std::string>{"--nnodes",
                                       "2",
                                       "--nproc-per-node",
                                       "1",
                                       "--rdzv-backend",
                                       "tcp",
                                       "--rdzv-endpoint",
                                       "10.77.0.1:29400",
                                       "--rdzv-id",
                                       unique_id("ns-tcp"),
                                       "--rdzv-conf",
                                       "timeout=60",
                                       "sh",
                                       "-c",
                                       worker(d)};
  // Node B starts first: it must wait for A's store rather than host one itself.
  Child n1(in_ns(ns.b(), args), {}, d / "n1.out", d / "n1.err");
  Child n0(in_ns(ns.a(), args), {}, d / "n0.out", d / "n0.err");
  CHECK(n0.wait() == 0);
  CHECK(n1.wait() == 0);
  INFO(slurp(d / "n0.err"), slurp(d / "n1.err"));
  std::set<std::string> masters, groups;
  for (int rank = 0; rank < 2; ++rank) {
    auto e = parse_env_dump(slurp(d / ("env." + std::to_string(rank))));
    masters.insert(e["MASTER_ADDR"]);
    groups.insert(e["GROUP_RANK"]);
    CHECK(e["DDP_STORE"] == "10.77.0.1:29400");
  }
  CHECK(masters.size() == 1);
  CHECK((*masters.begin() == "10.77.0.1" || *masters.begin() == "10.77.0.2"));  // node 0's own address
  CHECK(groups == std::set<std::string>{"0", "1"});
}

TEST_CASE("netns: a node that never arrives makes the other exit 121" * doctest::skip(!can_run())) {
  NetnsPair ns;
  REQUIRE(ns.ok());
  ScratchDir d;
  Child n0(in_ns(ns.a(), {"--nnodes", "2", "--rdzv-backend", "tcp", "--rdzv-endpoint", "10.77.0.1:29400",
                          "--rdzv-conf", "timeout=2", "true"}),
           {}, d / "n0.out", d / "n0.err");
  CHECK(n0.wait() == 121);
  CHECK(slurp(d / "n0.err").find("1 of 2 nodes arrived") != std::string::npos);
}
