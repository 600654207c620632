#pragma once
// The MPI world the mpi backend's tests run in (mpirun -np 2 or 3, or an MPI singleton): every
// rank runs the same cases in the same order, each checking its own results.
#include <algorithm>
#include <cstdlib>
#include <numeric>
#include <string>
#include <vector>

#include "comm/mpi/mpi_process_group.h"
#include "rendezvous/hash_store.h"

namespace ddp::comm::mpi_test {

using mpi_backend::MpiRuntime;

inline int world_size() { return MpiRuntime::instance().world_size(); }
inline int world_rank() { return MpiRuntime::instance().world_rank(); }

inline GroupSetup setup(std::vector<int> members, const std::string& name, Millis timeout = Millis(60'000)) {
  GroupSetup s;
  s.store = std::make_shared<rdzv::HashStore>();  // unused by mpi
  s.global_ranks = members;
  s.size = static_cast<int>(members.size());
  s.rank = static_cast<int>(std::find(members.begin(), members.end(), world_rank()) - members.begin());
  s.name = name;
  s.options.timeout = timeout;
  return s;
}

inline std::vector<int> all_ranks() {
  std::vector<int> v(world_size());
  std::iota(v.begin(), v.end(), 0);
  return v;
}

inline ProcessGroupPtr world() {
  static ProcessGroupPtr g = make_mpi_group(setup(all_ranks(), "world"));
  return g;
}

inline bool multi() { return world_size() >= 3; }

// Small collectives on the caller's thread (DDP_MPI_CALLER_BYTES: 4096 here, default 2048; and
// all_reduces up to DDP_MPI_P2P_BYTES, 64 KiB), set before any group is made: the cases below
// count on 16 B ops running there and on 256 KiB ops
// staying blocking.
[[maybe_unused]] inline const bool caller_path = ::setenv("DDP_MPI_CALLER_BYTES", "4096", 0) == 0;
// 64 KiB, as for groups of any size (a power of two's default is every size): 256 KiB is MPI's.
[[maybe_unused]] inline const bool p2p_limit = ::setenv("DDP_MPI_P2P_BYTES", "65536", 0) == 0;

}  // namespace ddp::comm::mpi_test
