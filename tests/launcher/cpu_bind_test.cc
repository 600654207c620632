#include "launcher/cpu_bind.h"

#include <doctest/doctest.h>

#include <filesystem>

#include "common/error.h"

using namespace ddp;
using namespace ddp::launcher;

TEST_CASE("cpu lists parse and format") {
  CHECK(parse_cpu_list("0-3,8,10-11") == std::vector<int>{0, 1, 2, 3, 8, 10, 11});
  CHECK(parse_cpu_list("5") == std::vector<int>{5});
  CHECK(format_cpu_list({0, 1, 2, 3, 8, 10, 11}) == "0-3,8,10-11");
  CHECK(format_cpu_list({}) == "");
  CHECK_THROWS_AS(parse_cpu_list("1-x"), InvalidArgument);
  CHECK_THROWS_AS(parse_cpu_list("3-1"), InvalidArgument);
  CHECK(parse_cpu_bind("cores") == CpuBind::kCores);
  CHECK_THROWS_AS(parse_cpu_bind("sockets"), InvalidArgument);
}

TEST_CASE("cores: hyperthread siblings stay together, blocks are disjoint and even") {
  // 4 cores x 2 threads: cpu i and i+4 are siblings (Linux's usual numbering).
  std::vector<int> cpus = {0, 1, 2, 3, 4, 5, 6, 7};
  std::vector<long> core = {0, 1, 2, 3, 0, 1, 2, 3};
  std::vector<int> node(8, 0);
  auto split = split_cpus(CpuBind::kCores, 2, cpus, core, node);
  REQUIRE(split.size() == 2);
  CHECK(split[0] == std::vector<int>{0, 1, 4, 5});
  CHECK(split[1] == std::vector<int>{2, 3, 6, 7});
  // More ranks than cores: logical CPUs are split instead.
  auto eight = split_cpus(CpuBind::kCores, 8, cpus, core, node);
  for (int r = 0; r < 8; ++r) CHECK(eight[r].size() == 1);
  // More ranks than CPUs: shared round-robin, never empty.
  auto many = split_cpus(CpuBind::kCores, 10, cpus, core, node);
  CHECK(many[9] == std::vector<int>{cpus[9 % 8]});
}

TEST_CASE("auto: cores for 2 or more ranks with a CPU each, else none (the default)") {
  std::vector<int> cpus = {0, 1, 2, 3, 4, 5, 6, 7};
  std::vector<long> core = {0, 1, 2, 3, 0, 1, 2, 3};
  std::vector<int> node(8, 0);
  CHECK(split_cpus(CpuBind::kAuto, 2, cpus, core, node) == split_cpus(CpuBind::kCores, 2, cpus, core, node));
  CHECK(split_cpus(CpuBind::kAuto, 8, cpus, core, node) == split_cpus(CpuBind::kCores, 8, cpus, core, node));
  CHECK(split_cpus(CpuBind::kAuto, 1, cpus, core, node).empty());  // one rank: nothing to split
  CHECK(split_cpus(CpuBind::kAuto, 9, cpus, core, node).empty());  // more ranks than CPUs: the kernel's
  CHECK(LaunchOptions{}.cpu_bind == CpuBind::kAuto);
  CHECK(parse_cpu_bind("auto") == CpuBind::kAuto);
  CHECK(std::string(to_string(CpuBind::kAuto)) == "auto");
}

TEST_CASE("numa: ranks spread over nodes in contiguous blocks") {
  std::vector<int> cpus = {0, 1, 2, 3};
  std::vector<long> core = {0, 1, 2, 3};
  std::vector<int> node = {0, 0, 1, 1};
  auto split = split_cpus(CpuBind::kNuma, 4, cpus, core, node);
  CHECK(split[0] == std::vector<int>{0, 1});
  CHECK(split[1] == std::vector<int>{0, 1});
  CHECK(split[2] == std::vector<int>{2, 3});
  CHECK(split[3] == std::vector<int>{2, 3});
  CHECK(split_cpus(CpuBind::kNone, 4, cpus, core, node).empty());
}

TEST_CASE("this machine: every rank gets allowed CPUs") {
  cpu_set_t allowed;
  REQUIRE(sched_getaffinity(0, sizeof allowed, &allowed) == 0);
  for (CpuBind mode : {CpuBind::kCores, CpuBind::kNuma}) {
    auto split = cpu_assignment(mode, 3);
    REQUIRE(split.size() == 3);
    for (const auto& cpus : split) {
      CHECK(!cpus.empty());
      for (int c : cpus) CHECK(CPU_ISSET(c, &allowed));
    }
  }
  CHECK(cpu_assignment(CpuBind::kNone, 3).empty());
}

TEST_CASE("NUMA node of a rank's CPUs (for --numa-binding's memory policy): -1 when unknown") {
  CHECK(numa_node_of({}) == -1);
  CHECK(numa_node_of({1 << 20}) == -1);  // no such CPU
  auto split = cpu_assignment(CpuBind::kNuma, 1);
  REQUIRE(split.size() == 1);
  const int node = numa_node_of(split[0]);
  const bool has_numa_info = std::filesystem::exists("/sys/devices/system/node/node0");
  CHECK(node >= (has_numa_info ? 0 : -1));
}
