#pragma once
// How backends are made. Each backend (comm/tcp, comm/gloo, comm/mpi, comm/nccl) is its own
// target exposing one factory; the registry (comm/backend_registry.cc, in target ddp_init)
// knows the backends that were built. init_process_group and new_group go through it.
#include <memory>
#include <string>
#include <vector>

#include "comm/process_group.h"
#include "rendezvous/store.h"

namespace ddp::comm {

struct GroupSetup {
  std::shared_ptr<rdzv::Store> store;  // already namespaced for this group (PrefixStore)
  int rank = 0;                        // rank within the group
  int size = 1;
  ProcessGroup::Options options;
  std::string job_token;          // authenticates every connection (DDP_JOB_TOKEN)
  std::vector<int> global_ranks;  // group rank -> rank in the world group
  std::string name = "world";     // for errors and logs
};

using BackendFactory = ProcessGroupPtr (*)(const GroupSetup&);

ProcessGroupPtr make_tcp_group(const GroupSetup& setup);   // comm/tcp
ProcessGroupPtr make_gloo_group(const GroupSetup& setup);  // comm/gloo (DDP_WITH_GLOO)
ProcessGroupPtr make_mpi_group(const GroupSetup& setup);   // comm/mpi  (DDP_WITH_MPI)
ProcessGroupPtr make_nccl_group(const GroupSetup& setup);  // comm/nccl (DDP_WITH_NCCL)

// "tcp", "gloo", "mpi", "nccl": the backend, or InvalidArgument listing those built.
ProcessGroupPtr create_group(const std::string& backend, const GroupSetup& setup);
std::vector<std::string> available_backends();

}  // namespace ddp::comm
