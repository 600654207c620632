// The registry of built backends. Which exist is decided at build time: the ddp_init target
// defines DDP_WITH_TCP/GLOO/MPI/NCCL for each ddp_comm_<name> target it links.
#include <utility>

#include "comm/backend.h"
#include "common/error.h"
#ifdef DDP_WITH_NCCL
#include "comm/nccl/cuda_staging.h"
#endif
#ifdef DDP_WITH_TCP
#include "comm/tcp/tcp_process_group.h"
#endif

namespace ddp::comm {
namespace {

#ifdef DDP_WITH_NCCL
// Where CUDA was built, tcp takes CUDA buffers by staging them through pinned host memory
// (host buffers pass straight through), so two ranks can share one GPU.
ProcessGroupPtr make_staged_tcp_group(const GroupSetup& setup) {
  return wrap_cuda_staging(make_tcp_group(setup));
}
#endif

const std::vector<std::pair<std::string, BackendFactory>>& backends() {
  static const std::vector<std::pair<std::string, BackendFactory>> kBackends = {
#if defined(DDP_WITH_TCP) && defined(DDP_WITH_NCCL)
    {"tcp", &make_staged_tcp_group},
#elif defined(DDP_WITH_TCP)
    {"tcp", &make_tcp_group},
#endif
#ifdef DDP_WITH_GLOO
    {"gloo", &make_gloo_group},
#endif
#ifdef DDP_WITH_MPI
    {"mpi", &make_mpi_group},
#endif
#ifdef DDP_WITH_NCCL
    {"nccl", &make_nccl_group},
#endif
  };
  return kBackends;
}

#ifdef DDP_WITH_TCP
// A hierarchical tcp group's step between hosts may run on another built backend
// (DDP_TCP_INTER): the tcp target cannot link the registry, so the registry hands itself over.
[[maybe_unused]] const bool kInterNodeInstalled = (tcp::set_inter_node_factory(&create_group), true);
#endif

std::string built_list() {
  std::string out;
  for (const auto& [name, factory] : backends()) out += (out.empty() ? "" : ", ") + name;
  return out.empty() ? "none" : out;
}

}  // namespace

std::vector<std::string> available_backends() {
  std::vector<std::string> out;
  for (const auto& [name, factory] : backends()) out.push_back(name);
  return out;
}

ProcessGroupPtr create_group(const std::string& backend, const GroupSetup& setup) {
  for (const auto& [name, factory] : backends()) {
    if (name == backend) {
      if (!setup.store) DDP_THROW(InvalidArgument, "create_group(", backend, "): no store given");
      return factory(setup);
    }
  }
  const bool known = backend == "tcp" || backend == "gloo" || backend == "mpi" || backend == "nccl";
  DDP_THROW(InvalidArgument, "backend '", backend, "' ", known ? "was not built" : "is unknown",
            "; built backends: ", built_list());
}

}  // namespace ddp::comm
