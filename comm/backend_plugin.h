#pragma once
// Backends as plugins, for the shared libddp: libddp.so holds the tcp backend; gloo, mpi and
// nccl are libddp_backend_<name>.so beside it, loaded with dlopen the first time a group of
// that backend is made, so a program that uses tcp never loads MPI, Gloo, NCCL or CUDA, and
// runs where they are not installed. (Programs linking the static modules, as the tests and
// ddp-launch do, use the compile-time registry in comm/backend_registry.cc instead.)
//
// A plugin exports one C symbol, ddp_backend_plugin, returning its BackendPlugin. The ABI
// version guards against a plugin from another build of libddp.
#include "comm/backend.h"
#include "comm/staging_on_demand.h"

namespace ddp::comm {

inline constexpr int kBackendPluginAbi = 1;
inline constexpr const char* kBackendPluginSymbol = "ddp_backend_plugin";

struct BackendPlugin {
  int abi = kBackendPluginAbi;
  const char* name = "";  // "gloo", "mpi", "nccl"
  BackendFactory make_group = nullptr;
  // nccl only: the decorator that lets a host group (tcp) take CUDA buffers (staging_on_demand.h).
  StagingFactory wrap_host_group = nullptr;
};

// "libddp_backend_mpi.so"
std::string plugin_file(const std::string& backend);

// The plugin of `backend`, loaded once: from the directory of the library that holds this
// code first, then the dynamic linker's search path. BackendError naming the file and what the
// loader said (e.g. "libmpi.so.40: cannot open shared object file") when it cannot load.
const BackendPlugin& load_backend_plugin(const std::string& backend);

}  // namespace ddp::comm

// Defines the plugin's entry point in a backend's plugin.cc.
#define DDP_BACKEND_PLUGIN(backend_name, factory, staging)                                                   \
  extern "C" __attribute__((visibility("default"))) const ::ddp::comm::BackendPlugin* ddp_backend_plugin() { \
    static const ::ddp::comm::BackendPlugin plugin{::ddp::comm::kBackendPluginAbi, backend_name, factory,    \
                                                   staging};                                                 \
    return &plugin;                                                                                          \
  }
