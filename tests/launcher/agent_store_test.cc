// The agent's pure decisions: where the store lives, tokens, addresses, ports.
#include <doctest/doctest.h>

#include "common/socket.h"
#include "launcher/agent.h"

using namespace ddp::launcher;
using K = StorePlan::Kind;

namespace {

AgentOptions multi(RdzvBackend backend, int node_rank = -1) {
  AgentOptions o;
  o.launch.nnodes_min = o.launch.nnodes_max = 2;
  o.launch.rdzv_backend = backend;
  o.launch.node_rank = node_rank;
  o.launch.master_addr = "10.9.9.9";
  o.launch.master_port = 29500;
  o.launch.run_id = "job1";
  return o;
}

}  // namespace

TEST_CASE("single node and standalone: a private store on 127.0.0.1, ephemeral port") {
  AgentOptions o;
  auto p = plan_store(o);
  CHECK(p.kind == K::kHost);
  CHECK(p.bind_host == "127.0.0.1");
  CHECK(p.port == 0);
  o.launch.standalone = true;
  CHECK(plan_store(o).connect_host == "127.0.0.1");
}

TEST_CASE("static: node 0 hosts on master_port+1, the others connect to master_addr") {
  auto p0 = plan_store(multi(RdzvBackend::kStatic, 0));
  CHECK(p0.kind == K::kHost);
  CHECK(p0.port == 29501);
  CHECK(p0.connect_host == "10.9.9.9");
  CHECK(p0.bind_host.empty());  // 10.9.9.9 is not this host: bind every interface
  auto p1 = plan_store(multi(RdzvBackend::kStatic, 1));
  CHECK(p1.kind == K::kConnect);
  CHECK(p1.connect_host == "10.9.9.9");
  CHECK(p1.port == 29501);
  auto e = multi(RdzvBackend::kStatic, 1);
  e.launch.rdzv_endpoint = "10.8.8.8:4000";
  CHECK(plan_store(e).port == 4000);
  CHECK(plan_store(e).connect_host == "10.8.8.8");
  e.rdzv_is_host = true;
  CHECK(plan_store(e).kind == K::kHost);
}

TEST_CASE("tcp: a local endpoint is hosted by whoever binds it first; a remote one is connected to") {
  auto local = multi(RdzvBackend::kTcp);
  local.launch.rdzv_endpoint = "127.0.0.1:29999";
  auto p = plan_store(local);
  CHECK(p.kind == K::kHostOrConnect);
  CHECK(p.bind_host == "127.0.0.1");
  CHECK(p.port == 29999);
  auto remote = multi(RdzvBackend::kTcp);
  remote.launch.rdzv_endpoint = "192.0.2.1";  // TEST-NET-1: never this host
  auto r = plan_store(remote);
  CHECK(r.kind == K::kConnect);
  CHECK(r.port == 29400);  // torchrun's default
  remote.rdzv_is_host = true;
  CHECK(plan_store(remote).kind == K::kHost);
}

TEST_CASE("file: a store file per run id in the shared directory") {
  auto o = multi(RdzvBackend::kFile);
  o.launch.rdzv_endpoint = "/shared/rdzv";
  auto p = plan_store(o);
  CHECK(p.kind == K::kFile);
  CHECK(p.file_path == "/shared/rdzv/job1.store");
}

TEST_CASE("multicast: the group and port, decided on the group who hosts") {
  auto o = multi(RdzvBackend::kMulticast);
  o.launch.rdzv_endpoint = "239.255.1.2:29400";
  auto p = plan_store(o);
  CHECK(p.kind == K::kMulticast);
  CHECK(p.group == "239.255.1.2");
  CHECK(p.port == 29400);
  o.launch.rdzv_endpoint = "[ff15::9]:29401";
  CHECK(plan_store(o).group == "ff15::9");
  CHECK(plan_store(o).port == 29401);
  o.launch.nnodes_min = o.launch.nnodes_max = 1;  // one node: a private store, no discovery
  CHECK(plan_store(o).kind == K::kHost);
}

TEST_CASE("etcd: nothing to host or find, whatever the node; one node keeps a private store") {
  auto o = multi(RdzvBackend::kEtcd);
  o.launch.rdzv_endpoint = "e1,e2,e3";
  CHECK(plan_store(o).kind == K::kEtcd);
  o.launch.nnodes_min = o.launch.nnodes_max = 1;
  CHECK(plan_store(o).kind == K::kHost);
}

TEST_CASE("tokens: derived ones are stable per id; random ones are fresh") {
  CHECK(derive_job_token("a") == derive_job_token("a"));
  CHECK(derive_job_token("a") != derive_job_token("b"));
  CHECK(derive_job_token("x").size() == 32);
  CHECK(derive_job_token("x").find_first_not_of("0123456789abcdef") == std::string::npos);
  // Pinned: SHA-256 of "ddp-launch job token v2:x", whatever libraries the launcher was built with.
  CHECK(derive_job_token("x") == "f889babe46b670497ca92f9a344ab492");
  CHECK(random_hex(16).size() == 32);
  CHECK(random_hex(16) != random_hex(16));
}

TEST_CASE("host facts: free ports, local addresses, local hosts") {
  int p = free_port();
  CHECK(p > 0);
  CHECK(p < 65536);
  auto via_lo = local_addresses("127.0.0.1");
  REQUIRE_FALSE(via_lo.empty());
  CHECK(via_lo.front() == "127.0.0.1");  // the route to a loopback peer starts at loopback
  CHECK(is_local_host("127.0.0.1"));
  CHECK(is_local_host("localhost"));
  CHECK(is_local_host(ddp::net::hostname()));
  CHECK_FALSE(is_local_host("192.0.2.1"));
}

TEST_CASE("predicted assignment for --dry-run: same nproc on every node") {
  auto o = multi(RdzvBackend::kStatic, 1);
  o.launch.nproc_per_node = 4;
  auto a = predicted_assignment(o);
  CHECK(a.world_size == 8);
  CHECK(a.rank_offset == 4);
  CHECK(a.node_rank == 1);
  CHECK(a.master_addr == "10.9.9.9");
}
