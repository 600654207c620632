#pragma once
// What this machine is, read once from /proc and sysfs: the CPU model, the cores this process
// may run on, and the data-cache sizes. Benchmarks print it beside every figure (a figure
// without its machine means little: machines of one "kind" differ from day to day), and code
// that sizes buffers or picks a wait policy reads it instead of assuming one machine's values.
// Values that cannot be read are 0 / "" (a container without sysfs): callers keep a default.
// Cache sizes missing from sysfs (some VMs expose none) come from sysconf(_SC_LEVEL*_CACHE_*)
// and, for the L2, cpuid leaf 0x80000006 on x86, unless the options turn that off.
#include <cstddef>
#include <string>
#include <vector>

namespace ddp {

struct MachineProfile {
  std::string cpu_model;  // /proc/cpuinfo "model name" ("" when absent, e.g. some ARM)
  int online_cpus = 0;    // CPUs online on the machine
  int usable_cpus = 0;    // CPUs this process may run on (its affinity mask)
  size_t l1d_bytes = 0;   // per core
  size_t l2_bytes = 0;    // per instance (usually per core)
  size_t l3_bytes = 0;    // per instance (a socket, or an AMD CCX)
  int l2_shared_by = 0;   // CPUs sharing one L2 (hyper-threads)
  int l3_shared_by = 0;   // CPUs sharing one L3

  // "AMD EPYC 7B13, 2/2 CPUs, L1d 32 KiB, L2 512 KiB, L3 32 MiB (2 CPUs share it)"
  std::string summary() const;
};

struct MachineProfileOptions {
  std::string proc_root = "/proc";  // tests point these at a fake tree
  std::string sys_cpu_root = "/sys/devices/system/cpu";
  bool cache_fallback = true;  // sysconf / cpuid when sysfs has no cache sizes (tests: false)
};

// Reads the profile (no caching: callers keep it). Never throws for missing files.
MachineProfile read_machine_profile(const MachineProfileOptions& options = {});

// This machine's profile, read on first use (thread-safe).
const MachineProfile& machine_profile();

// The CPUs this host's ranks of a job share, which sizes how they wait for each other and how
// many threads each may run: DDP_LOCAL_CPUS when set (ddp-launch sets it for its workers to the
// CPUs it may itself run on: a container's cpuset, a Slurm allocation), else the CPUs this
// process may run on. A process bound to one core of a 16-core allocation (mpirun, srun, ddp-bench
// -n) thus still sees 16 when started with the variable; one in a 2-CPU container of a 64-CPU
// machine sees 2 either way. InvalidArgument naming the variable unless it is a positive count.
int local_cpus();

// The number of CPUs this process may run on (its affinity mask); 0 when it cannot be read.
int affinity_cpus();

// The first `at_most` CPUs this thread may run on (its affinity mask), in increasing order;
// fewer when the mask holds fewer, none when it cannot be read.
std::vector<int> first_usable_cpus(int at_most);

// "32K" / "1024K" / "32M" (sysfs cache sizes) in bytes; 0 when not a size.
size_t parse_cache_size(const std::string& text);

}  // namespace ddp
