#include "cli/device_count.h"

#include <dlfcn.h>
#include <sched.h>

#include <algorithm>
#include <cctype>
#include <filesystem>
#include <thread>
#include <vector>

namespace ddp::cli {
namespace {

// The few NVML entry points used, declared here so no NVML header is needed.
using NvmlDevice = void*;
using NvmlInit = int (*)();
using NvmlShutdown = int (*)();
using NvmlGetCount = int (*)(unsigned*);
using NvmlGetHandle = int (*)(unsigned, NvmlDevice*);
using NvmlGetMigMode = int (*)(NvmlDevice, unsigned*, unsigned*);
using NvmlGetMaxMig = int (*)(NvmlDevice, unsigned*);
using NvmlGetMigHandle = int (*)(NvmlDevice, unsigned, NvmlDevice*);
constexpr int kNvmlSuccess = 0;
constexpr unsigned kNvmlMigEnabled = 1;

class Library {
 public:
  explicit Library(const std::string& name) : handle_(::dlopen(name.c_str(), RTLD_NOW | RTLD_LOCAL)) {}
  ~Library() {
    if (handle_ != nullptr) ::dlclose(handle_);
  }
  Library(const Library&) = delete;
  Library& operator=(const Library&) = delete;
  bool loaded() const { return handle_ != nullptr; }
  template <typename F>
  F symbol(const char* name) const {
    return reinterpret_cast<F>(::dlsym(handle_, name));
  }

 private:
  void* handle_;
};

// MIG instances of a GPU in MIG mode (CUDA enumerates those, not the GPU); 1 otherwise.
int devices_of(const Library& nvml, NvmlDevice gpu) {
  auto mig_mode = nvml.symbol<NvmlGetMigMode>("nvmlDeviceGetMigMode");
  auto max_mig = nvml.symbol<NvmlGetMaxMig>("nvmlDeviceGetMaxMigDeviceCount");
  auto mig_handle = nvml.symbol<NvmlGetMigHandle>("nvmlDeviceGetMigDeviceHandleByIndex");
  unsigned current = 0, pending = 0, max = 0;
  if (!mig_mode || !max_mig || !mig_handle || mig_mode(gpu, &current, &pending) != kNvmlSuccess ||
      current != kNvmlMigEnabled || max_mig(gpu, &max) != kNvmlSuccess) {
    return 1;
  }
  int n = 0;
  for (unsigned i = 0; i < max; ++i) {
    NvmlDevice mig = nullptr;
    if (mig_handle(gpu, i, &mig) == kNvmlSuccess) ++n;
  }
  return n;
}

std::string trim_lower(const std::string& s) {
  std::string out;
  for (char c : s) {
    if (!std::isspace(static_cast<unsigned char>(c)))
      out += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  }
  return out;
}

int count_cuda_visible_devices(const std::string& value) {
  const std::string t = trim_lower(value);
  int n = 0;
  size_t start = 0;
  while (start <= t.size()) {
    size_t comma = t.find(',', start);
    std::string item = t.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
    const bool index = !item.empty() && std::all_of(item.begin(), item.end(),
                                                    [](unsigned char c) { return std::isdigit(c) != 0; });
    if (!index && !item.starts_with("gpu-") && !item.starts_with("mig-"))
      break;  // CUDA stops at the first invalid entry
    ++n;
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  return n;
}

int count_device_files(const std::string& dir) {
  int n = 0;
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator(dir, ec)) {
    const std::string name = entry.path().filename().string();
    if (name.size() > 6 && name.starts_with("nvidia") &&
        std::all_of(name.begin() + 6, name.end(), [](unsigned char c) { return std::isdigit(c) != 0; })) {
      ++n;  // nvidia[0-9]+
    }
  }
  return n;
}

}  // namespace

std::optional<int> nvml_gpu_count(const std::string& library) {
  Library nvml(library);
  if (!nvml.loaded()) return std::nullopt;
  auto init = nvml.symbol<NvmlInit>("nvmlInit_v2");
  auto shutdown = nvml.symbol<NvmlShutdown>("nvmlShutdown");
  auto get_count = nvml.symbol<NvmlGetCount>("nvmlDeviceGetCount_v2");
  auto get_handle = nvml.symbol<NvmlGetHandle>("nvmlDeviceGetHandleByIndex_v2");
  if (!init || !shutdown || !get_count || !get_handle || init() != kNvmlSuccess) return std::nullopt;
  std::optional<int> total;
  unsigned gpus = 0;
  if (get_count(&gpus) == kNvmlSuccess) {
    total = 0;
    for (unsigned i = 0; i < gpus; ++i) {
      NvmlDevice dev = nullptr;
      if (get_handle(i, &dev) == kNvmlSuccess) *total += devices_of(nvml, dev);
    }
  }
  shutdown();
  return total;
}

int count_visible_gpus(const EnvLookup& env, const GpuCountOptions& options) {
  if (auto cvd = env("CUDA_VISIBLE_DEVICES")) return count_cuda_visible_devices(*cvd);
  if (auto n = nvml_gpu_count(options.nvml_library)) return *n;
  return count_device_files(options.dev_dir);
}

int count_cpus() {
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof(set), &set) == 0) return std::max(1, CPU_COUNT(&set));
  return static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
}

}  // namespace ddp::cli
