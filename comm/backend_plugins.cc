// The registry of the shared libddp (see comm/backend_plugin.h): tcp built in (taking CUDA
// buffers through the nccl plugin's staging, loaded when the first one comes:
// staging_on_demand.h), the other backends loaded as plugins on first use. Implements comm/backend.h's
// registry functions in place of comm/backend_registry.cc.
#include <dlfcn.h>
#include <sys/stat.h>

#include <map>
#include <mutex>

#include "comm/backend_plugin.h"
#include "comm/tcp/tcp_process_group.h"
#include "common/error.h"

namespace ddp::comm {
namespace {

const std::vector<std::string>& plugin_backends() {
  static const std::vector<std::string> kNames = {"gloo", "mpi", "nccl"};
  return kNames;
}

// The directory of the shared object this function is in (libddp.so), "" if unknown.
std::string own_directory() {
  Dl_info info{};
  if (::dladdr(reinterpret_cast<void*>(&own_directory), &info) == 0 || info.dli_fname == nullptr) return "";
  std::string path = info.dli_fname;
  const size_t slash = path.rfind('/');
  return slash == std::string::npos ? "" : path.substr(0, slash);
}

bool exists(const std::string& path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0;
}

const BackendPlugin& open_plugin(const std::string& backend) {
  const std::string file = plugin_file(backend);
  const std::string dir = own_directory();
  const std::string beside = dir.empty() ? "" : dir + "/" + file;
  // Beside libddp when it is there (an install, a build tree), else the linker's search path.
  const std::string target = !beside.empty() && exists(beside) ? beside : file;
  void* lib = ::dlopen(target.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (lib == nullptr) {
    const char* why = ::dlerror();
    DDP_THROW(BackendError, "backend '", backend, "' lives in ", file,
              ", which could not be loaded: ", why ? why : "unknown error",
              " (is its library installed? built backends are ", file, " beside libddp.so)");
  }
  using Entry = const BackendPlugin* (*)();
  auto entry = reinterpret_cast<Entry>(::dlsym(lib, kBackendPluginSymbol));
  const BackendPlugin* plugin = entry ? entry() : nullptr;
  if (plugin == nullptr || plugin->abi != kBackendPluginAbi || plugin->make_group == nullptr ||
      backend != plugin->name) {
    DDP_THROW(BackendError, target, " is not a libddp backend plugin for '", backend, "' of this build (ABI ",
              kBackendPluginAbi, ")");
  }
  return *plugin;  // the library stays loaded: groups and their threads live in it
}

// For tcp groups' CUDA buffers: the nccl plugin's staging decorator, loaded on first need.
StagingFactory load_cuda_staging() {
  const BackendPlugin& nccl = load_backend_plugin("nccl");
  if (nccl.wrap_host_group == nullptr) DDP_THROW(BackendError, plugin_file("nccl"), " has no CUDA staging");
  return nccl.wrap_host_group;
}

}  // namespace

std::string plugin_file(const std::string& backend) { return "libddp_backend_" + backend + ".so"; }

const BackendPlugin& load_backend_plugin(const std::string& backend) {
  static std::mutex mu;
  static std::map<std::string, const BackendPlugin*> loaded;
  std::lock_guard<std::mutex> lock(mu);
  auto it = loaded.find(backend);
  if (it == loaded.end()) it = loaded.emplace(backend, &open_plugin(backend)).first;
  return *it->second;
}

// tcp, and every plugin whose file is beside libddp or on the search path (not loaded here:
// listing must not load MPI).
std::vector<std::string> available_backends() {
  std::vector<std::string> out = {"tcp"};
  const std::string dir = own_directory();
  for (const auto& b : plugin_backends()) {
    if (!dir.empty() && exists(dir + "/" + plugin_file(b))) out.push_back(b);
  }
  return out;
}

ProcessGroupPtr create_group(const std::string& backend, const GroupSetup& setup) {
  if (!setup.store) DDP_THROW(InvalidArgument, "create_group(", backend, "): no store given");
  if (backend == "tcp") return stage_on_demand(make_tcp_group(setup), &load_cuda_staging);
  for (const auto& b : plugin_backends()) {
    if (b == backend) return load_backend_plugin(backend).make_group(setup);
  }
  DDP_THROW(InvalidArgument, "backend '", backend, "' is unknown; backends: tcp, gloo, mpi, nccl");
}

namespace {
// A hierarchical tcp group's step between hosts may run on a plugin (DDP_TCP_INTER).
[[maybe_unused]] const bool kInterNodeInstalled = (tcp::set_inter_node_factory(&create_group), true);
}  // namespace

}  // namespace ddp::comm
