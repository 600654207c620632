#pragma once
// --cpu-bind: splitting the CPUs this launcher may use (sched_getaffinity) among the node's
// local ranks.
//   none   every worker inherits the launcher's affinity.
//   cores  physical cores (hyperthread siblings kept together) are split into contiguous,
//          disjoint blocks, as even as possible; with fewer cores than ranks, logical CPUs are
//          split instead, and with fewer CPUs than ranks they are shared round-robin.
//   numa   ranks are spread over the NUMA nodes (/sys/devices/system/node) in contiguous
//          blocks; a rank gets every allowed CPU of its node. No NUMA info: one node.
//   auto   (the default) cores when there are 2 or more local ranks and a CPU for each, else none:
//          as mpirun binds a few ranks and leaves an oversubscribed node to the kernel. A split,
//          not a pin, so jobs sharing the node still use all of it (docs/launcher.md: figures).
#include <sched.h>

#include <string>
#include <vector>

#include "launcher/launch_options.h"

namespace ddp::launcher {

// CPU ids per local rank (each sorted); empty for CpuBind::kNone. Throws SystemError when the
// affinity cannot be read, InvalidArgument for local_world_size < 1.
std::vector<std::vector<int>> cpu_assignment(CpuBind mode, int local_world_size);

// The same split for an explicit CPU list and topology (exposed for tests):
// core_of[i] / node_of[i] are the physical core and NUMA node of cpus[i].
std::vector<std::vector<int>> split_cpus(CpuBind mode, int local_world_size, const std::vector<int>& cpus,
                                         const std::vector<long>& core_of, const std::vector<int>& node_of);

// "0-3,8,10-11" -> {0,1,2,3,8,10,11}. Throws InvalidArgument on malformed input.
std::vector<int> parse_cpu_list(const std::string& text);
std::string format_cpu_list(const std::vector<int>& cpus);  // the inverse, compressed

cpu_set_t to_cpu_set(const std::vector<int>& cpus);

// The NUMA node of the first of `cpus` (/sys/devices/system/node); -1 when unknown or empty.
int numa_node_of(const std::vector<int>& cpus);

CpuBind parse_cpu_bind(const std::string& name);  // none|cores|numa|auto, else InvalidArgument
const char* to_string(CpuBind mode);

}  // namespace ddp::launcher
