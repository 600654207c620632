// machine: the CPU model, CPU counts and cache sizes, from a fake /proc and sysfs tree (exact
// values) and from this machine (plausible values).
#include "common/machine.h"

#include <doctest/doctest.h>
#include <sched.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "common/error.h"

using namespace ddp;
namespace fs = std::filesystem;

namespace {

struct FakeTree {
  fs::path root = fs::temp_directory_path() / ("ddp-machine-test-" + std::to_string(::getpid()));
  FakeTree() { fs::create_directories(root / "proc"); }
  ~FakeTree() { fs::remove_all(root); }
  void write(const fs::path& rel, const std::string& text) {
    fs::create_directories((root / rel).parent_path());
    std::ofstream(root / rel) << text;
  }
  void cache(int index, int level, const std::string& type, const std::string& size,
             const std::string& shared) {
    const fs::path dir = fs::path("sys/cpu/cpu0/cache") / ("index" + std::to_string(index));
    write(dir / "level", std::to_string(level) + "\n");
    write(dir / "type", type + "\n");
    write(dir / "size", size + "\n");
    write(dir / "shared_cpu_list", shared + "\n");
  }
  MachineProfileOptions options() const {
    MachineProfileOptions o;
    o.proc_root = (root / "proc").string();
    o.sys_cpu_root = (root / "sys/cpu").string();
    return o;
  }
};

}  // namespace

TEST_CASE("cache sizes as sysfs writes them") {
  CHECK(parse_cache_size("32K") == 32u << 10);
  CHECK(parse_cache_size("1024K\n") == 1u << 20);
  CHECK(parse_cache_size("32M") == 32u << 20);
  CHECK(parse_cache_size("4096") == 4096u);
  CHECK(parse_cache_size("") == 0u);
  CHECK(parse_cache_size("K") == 0u);
  CHECK(parse_cache_size("12Q") == 0u);
  CHECK(parse_cache_size("99999999999999999999K") == 0u);
}

TEST_CASE("a full tree: model, CPUs, data caches by level (instruction cache ignored)") {
  FakeTree t;
  t.write("proc/cpuinfo",
          "processor\t: 0\nvendor_id\t: AuthenticAMD\nmodel name\t: AMD EPYC 7B13 64-Core Processor  \n");
  t.write("sys/cpu/online", "0-3,6\n");
  t.cache(0, 1, "Data", "32K", "0-1");
  t.cache(1, 1, "Instruction", "64K", "0-1");
  t.cache(2, 2, "Unified", "512K", "0-1");
  t.cache(3, 3, "Unified", "32768K", "0-5");
  const MachineProfile p = read_machine_profile(t.options());
  CHECK(p.cpu_model == "AMD EPYC 7B13 64-Core Processor");
  CHECK(p.online_cpus == 5);
  CHECK(p.l1d_bytes == 32u << 10);
  CHECK(p.l2_bytes == 512u << 10);
  CHECK(p.l2_shared_by == 2);
  CHECK(p.l3_bytes == 32u << 20);
  CHECK(p.l3_shared_by == 6);
  CHECK(p.summary().find("L2 512 KiB (2 CPUs share it)") != std::string::npos);
  CHECK(p.summary().find("L3 32 MiB") != std::string::npos);
}

TEST_CASE("an empty tree: zeros and counts from the system, never an error") {
  FakeTree t;
  MachineProfileOptions o = t.options();
  o.cache_fallback = false;
  const MachineProfile p = read_machine_profile(o);
  CHECK(p.cpu_model.empty());
  CHECK(p.online_cpus >= 1);
  CHECK(p.usable_cpus >= 1);
  CHECK(p.l2_bytes == 0u);
  CHECK(p.summary().find("unknown CPU") == 0);
}

TEST_CASE("a tree without cache sizes (some VMs): the L2 from sysconf or cpuid instead") {
  FakeTree t;
  const MachineProfile p = read_machine_profile(t.options());
  const long from_sysconf = ::sysconf(_SC_LEVEL2_CACHE_SIZE);
#if defined(__x86_64__)
  CHECK(p.l2_bytes >= 64u << 10);  // cpuid answers on every x86-64 this project runs on
#endif
  if (from_sysconf > 0) CHECK(p.l2_bytes == static_cast<size_t>(from_sysconf));
}

TEST_CASE("this machine: plausible values") {
  const MachineProfile& p = machine_profile();
  CHECK(p.online_cpus >= 1);
  CHECK(p.usable_cpus >= 1);
  CHECK(p.usable_cpus <= p.online_cpus);
  CHECK(&machine_profile() == &p);  // read once
  MESSAGE("this machine: " << p.summary());
}

TEST_CASE("first_usable_cpus: the mask's first CPUs in order, at most as many as asked, none for 0") {
  cpu_set_t set;
  CPU_ZERO(&set);
  REQUIRE(sched_getaffinity(0, sizeof(set), &set) == 0);
  const int count = CPU_COUNT(&set);
  CHECK(ddp::first_usable_cpus(0).empty());
  const auto all = ddp::first_usable_cpus(count + 5);
  REQUIRE(static_cast<int>(all.size()) == count);
  for (size_t i = 0; i < all.size(); ++i) {
    CHECK(CPU_ISSET(all[i], &set));
    if (i > 0) CHECK(all[i - 1] < all[i]);
  }
  const auto one = ddp::first_usable_cpus(1);
  REQUIRE(one.size() == 1);
  CHECK(one[0] == all[0]);
}

TEST_CASE("local_cpus: DDP_LOCAL_CPUS when set (a positive count), else this process's CPUs") {
  ::unsetenv("DDP_LOCAL_CPUS");
  cpu_set_t set;
  CPU_ZERO(&set);
  REQUIRE(::sched_getaffinity(0, sizeof(set), &set) == 0);
  CHECK(affinity_cpus() == CPU_COUNT(&set));
  CHECK(local_cpus() == CPU_COUNT(&set));
  ::setenv("DDP_LOCAL_CPUS", "48", 1);
  CHECK(local_cpus() == 48);
  for (const char* bad : {"0", "-2", "two", "4x", "4294967297", "99999999999999999999999"}) {
    CAPTURE(bad);
    ::setenv("DDP_LOCAL_CPUS", bad, 1);
    CHECK_THROWS_WITH_AS(local_cpus(), doctest::Contains("DDP_LOCAL_CPUS"), InvalidArgument);
  }
  ::unsetenv("DDP_LOCAL_CPUS");
}
