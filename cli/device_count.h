#pragma once
// How many workers `--nproc-per-node auto|gpu|cpu` means on this host.
//
// GPUs, as CUDA would enumerate them for a worker: CUDA_VISIBLE_DEVICES when set (its entries up
// to the first that is not an index, GPU-<uuid> or MIG-<uuid>, as CUDA reads it: "-1" and
// Slurm's "NoDevFiles" mean none); else the
// driver, asked through NVML (libnvidia-ml, loaded with dlopen: no link dependency, nothing to
// install on a machine without a GPU), counting each MIG instance of a GPU in MIG mode; else the
// /dev/nvidia<N> device files. CPUs: those this process may run on (sched_getaffinity), so a
// cgroup or taskset limit is respected. Nothing here throws.
#include <optional>
#include <string>

#include "cli/values.h"

namespace ddp::cli {

inline constexpr const char* kNvmlLibrary = "libnvidia-ml.so.1";

struct GpuCountOptions {
  std::string nvml_library = kNvmlLibrary;  // tests name a library that does not exist
  std::string dev_dir = "/dev";
};

// The driver's count through NVML; nullopt when the library does not load or NVML fails.
std::optional<int> nvml_gpu_count(const std::string& library = kNvmlLibrary);

int count_visible_gpus(const EnvLookup& env, const GpuCountOptions& options = {});
int count_cpus();

}  // namespace ddp::cli
