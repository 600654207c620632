#include "launcher/worker_env.h"

#include <doctest/doctest.h>
#include <sched.h>
#include <stdlib.h>

#include <algorithm>
#include <map>

#include "common/error.h"

using namespace ddp;
using namespace ddp::launcher;

namespace {
std::map<std::string, std::string> as_map(const EnvList& env) {
  std::map<std::string, std::string> m;
  for (const auto& [k, v] : env) m[k] = v;
  return m;
}
rdzv::NodeAssignment two_nodes() {
  rdzv::NodeAssignment a;
  a.node_rank = 1;
  a.nnodes = 2;
  a.world_size = 6;
  a.rank_offset = 4;
  a.local_world_size = 2;
  a.master_addr = "node0";
  a.master_port = 1234;
  a.store_endpoint = "node0:29400";
  a.job_token = "tok";
  a.run_id = "rid";
  return a;
}
}  // namespace

TEST_CASE("worker_env: torchrun's variables for a rank on the second node") {
  ::unsetenv("OMP_NUM_THREADS");
  LaunchOptions o;
  o.max_restarts = 2;
  auto env = as_map(worker_env(o, two_nodes(), {1, 1, "/tmp/e.json"}));
  CHECK(env["RANK"] == "5");
  CHECK(env["LOCAL_RANK"] == "1");
  CHECK(env["WORLD_SIZE"] == "6");
  CHECK(env["LOCAL_WORLD_SIZE"] == "2");
  CHECK(env["GROUP_RANK"] == "1");
  CHECK(env["GROUP_WORLD_SIZE"] == "2");
  CHECK(env["ROLE_NAME"] == "default");
  CHECK(env["ROLE_RANK"] == "5");
  CHECK(env["ROLE_WORLD_SIZE"] == "6");
  CHECK(env["MASTER_ADDR"] == "node0");
  CHECK(env["MASTER_PORT"] == "1234");
  CHECK(env["TORCHELASTIC_RESTART_COUNT"] == "1");
  CHECK(env["TORCHELASTIC_MAX_RESTARTS"] == "2");
  CHECK(env["TORCHELASTIC_RUN_ID"] == "rid");
  CHECK(env["TORCHELASTIC_USE_AGENT_STORE"] == "False");
  CHECK(env["TORCHELASTIC_ERROR_FILE"] == "/tmp/e.json");
  CHECK(env["OMP_NUM_THREADS"] == "1");
  CHECK(env["DDP_STORE"] == "node0:29400");
  CHECK(env["DDP_JOB_TOKEN"] == "tok");
  CHECK(env["DDP_RUN_ID"] == "rid");
  CHECK(env["DDP_NODE_RANK"] == "1");
}

TEST_CASE("worker_env: OMP_NUM_THREADS only when unset and several workers per node") {
  LaunchOptions o;
  auto a = two_nodes();
  ::setenv("OMP_NUM_THREADS", "8", 1);
  CHECK(as_map(worker_env(o, a, {0, 0, ""})).count("OMP_NUM_THREADS") == 0);
  ::unsetenv("OMP_NUM_THREADS");
  a.local_world_size = 1;
  a.world_size = 5;
  CHECK(as_map(worker_env(o, a, {0, 0, ""})).count("OMP_NUM_THREADS") == 0);
}

TEST_CASE("worker_env: DDP_LOCAL_CPUS is the launcher's own CPUs unless the user set it") {
  LaunchOptions o;
  ::unsetenv("DDP_LOCAL_CPUS");
  cpu_set_t set;
  CPU_ZERO(&set);
  REQUIRE(::sched_getaffinity(0, sizeof(set), &set) == 0);
  CHECK(as_map(worker_env(o, two_nodes(), {0, 0, ""}))["DDP_LOCAL_CPUS"] == std::to_string(CPU_COUNT(&set)));
  ::setenv("DDP_LOCAL_CPUS", "3", 1);  // the user's: the worker inherits it as is
  CHECK(as_map(worker_env(o, two_nodes(), {0, 0, ""})).count("DDP_LOCAL_CPUS") == 0);
  ::unsetenv("DDP_LOCAL_CPUS");
}

TEST_CASE("worker_env: --env entries come last and win; no error file, no variable") {
  LaunchOptions o;
  o.env = {{"OMP_NUM_THREADS", "4"}, {"X", "1"}, {"X", "2"}};
  auto list = worker_env(o, two_nodes(), {0, 0, ""});
  CHECK(list.back() == std::pair<std::string, std::string>{"X", "2"});
  char a[] = "PATH=/bin";
  char b[] = "X=0";
  char* base[] = {a, b, nullptr};
  auto merged = merge_environ(base, list);
  auto count = [&](const std::string& entry) { return std::count(merged.begin(), merged.end(), entry); };
  CHECK(count("X=2") == 1);
  CHECK(count("X=0") == 0);
  CHECK(count("X=1") == 0);
  CHECK(count("PATH=/bin") == 1);
  CHECK(count("OMP_NUM_THREADS=4") == 1);
  CHECK(as_map(list).count("TORCHELASTIC_ERROR_FILE") == 0);
}

TEST_CASE("worker_env: a local rank outside the node is an error") {
  LaunchOptions o;
  CHECK_THROWS_AS(worker_env(o, two_nodes(), {2, 0, ""}), InvalidArgument);
  CHECK_THROWS_AS(worker_env(o, two_nodes(), {-1, 0, ""}), InvalidArgument);
}

TEST_CASE("worker_env: master address falls back to the options, then loopback") {
  LaunchOptions o;
  auto a = two_nodes();
  a.master_addr.clear();
  CHECK(as_map(worker_env(o, a, {0, 0, ""}))["MASTER_ADDR"] == "127.0.0.1");
  o.master_addr = "10.0.0.1";
  CHECK(as_map(worker_env(o, a, {0, 0, ""}))["MASTER_ADDR"] == "10.0.0.1");
}

TEST_CASE("worker_env: --virtual-local-rank makes LOCAL_RANK 0 and shows each worker its own GPU") {
  LaunchOptions o;
  o.virtual_local_rank = true;
  ::unsetenv("CUDA_VISIBLE_DEVICES");
  auto env = as_map(worker_env(o, two_nodes(), {1, 0, ""}));
  CHECK(env["LOCAL_RANK"] == "0");
  CHECK(env["RANK"] == "5");
  CHECK(env["CUDA_VISIBLE_DEVICES"] == "1");
  ::setenv("CUDA_VISIBLE_DEVICES", "GPU-a,GPU-b", 1);
  CHECK(as_map(worker_env(o, two_nodes(), {1, 0, ""}))["CUDA_VISIBLE_DEVICES"] == "GPU-b");
  CHECK(as_map(worker_env(o, two_nodes(), {0, 0, ""}))["CUDA_VISIBLE_DEVICES"] == "GPU-a");
  ::setenv("CUDA_VISIBLE_DEVICES", "3", 1);
  CHECK_THROWS_WITH_AS(worker_env(o, two_nodes(), {1, 0, ""}),
                       doctest::Contains("no entry in CUDA_VISIBLE_DEVICES"), Error);
  ::unsetenv("CUDA_VISIBLE_DEVICES");
  o.virtual_local_rank = false;
  auto plain = as_map(worker_env(o, two_nodes(), {1, 0, ""}));
  CHECK(plain["LOCAL_RANK"] == "1");
  CHECK(plain.count("CUDA_VISIBLE_DEVICES") == 0);
}
