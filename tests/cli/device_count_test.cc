#include "cli/device_count.h"

#include <doctest/doctest.h>

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <map>

using namespace ddp::cli;

namespace {

EnvLookup env_of(std::map<std::string, std::string> vars) {
  return [vars](const std::string& n) -> std::optional<std::string> {
    auto it = vars.find(n);
    if (it == vars.end()) return std::nullopt;
    return it->second;
  };
}

GpuCountOptions no_nvml(const std::string& dev_dir) {
  GpuCountOptions o;
  o.nvml_library = "libddp-no-such-nvml.so.1";
  o.dev_dir = dev_dir;
  return o;
}

}  // namespace

TEST_CASE("CUDA_VISIBLE_DEVICES decides when set, read as CUDA reads it") {
  auto count = [](const char* v) { return count_visible_gpus(env_of({{"CUDA_VISIBLE_DEVICES", v}})); };
  CHECK(count("0,1,3") == 3);
  CHECK(count("GPU-abc,GPU-def") == 2);
  CHECK(count("MIG-1f0e,MIG-2a3b,MIG-4c5d") == 3);
  CHECK(count("0,-1,2") == 1);  // CUDA stops at the first invalid entry
  CHECK(count("") == 0);
  CHECK(count("-1") == 0);
  CHECK(count("NoDevFiles") == 0);
}

TEST_CASE("without NVML, /dev/nvidia<N> files are counted, and nothing else") {
  const auto dir = std::filesystem::temp_directory_path() / ("ddp-devcount-" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  for (const char* f : {"nvidia0", "nvidia1", "nvidiactl", "nvidia-uvm", "nvidia"})
    std::ofstream(dir / f).put('x');
  CHECK(count_visible_gpus(env_of({}), no_nvml(dir.string())) == 2);
  CHECK(count_visible_gpus(env_of({}), no_nvml((dir / "absent").string())) == 0);
  std::filesystem::remove_all(dir);
}

TEST_CASE("NVML: a library that is not there is no count; the real one, when loadable, gives one") {
  CHECK_FALSE(nvml_gpu_count("libddp-no-such-nvml.so.1").has_value());
  if (auto n = nvml_gpu_count()) {  // a host with the NVIDIA driver
    CHECK(*n >= 0);
    MESSAGE("NVML sees " << *n << " GPU(s) or MIG instance(s)");
  }
}

TEST_CASE("CPUs: the ones this process may run on") { CHECK(count_cpus() >= 1); }
