#pragma once
// The public entry point of the collectives, as torch.distributed offers it:
//   ddp::init_process_group({.backend = "tcp"});  // env:// by default
//   ddp::default_group()->all_reduce(ddp::comm::view(g.data(), g.size()))->wait();
//   auto evens = ddp::new_group({0, 2});          // every rank calls; non-members get nullptr
// Init methods (init.cc says how each meets): env:// (DDP_STORE, else rank 0 hosts a TCPStore on
// MASTER_ADDR:MASTER_PORT), tcp://host:port, tcp://<multicast group>:port, file:///path. Ranks and
// sizes: the options, the URL's ?rank=&world_size=, RANK/WORLD_SIZE, OMPI_COMM_WORLD_*, SLURM_*.
// Timeouts: options.timeout, else DDP_TIMEOUT_MS, else kDefaultCollectiveTimeout; a timeout also
// bounds reaching a TCP store. The job token (options, else DDP_JOB_TOKEN) authenticates.
// Errors: InvalidArgument for bad options or environment (naming the variable), TimeoutError when
// the peers do not arrive, and the backend's. Thread-safe; one process-wide default group
// (GroupFactory offers the same without globals).
#include <memory>
#include <string>
#include <vector>

#include "comm/group_factory.h"
#include "comm/init_store.h"
#include "comm/process_group.h"
#include "rendezvous/store.h"

namespace ddp {

struct InitOptions {
  std::string backend = "tcp";  // "tcp", "gloo", "mpi", "nccl"
  std::string init_method = "env://";
  int rank = -1;  // -1: from the init method / environment
  int world_size = -1;
  Millis timeout = kUseDefault;  // collectives' default; see the header comment
  std::string job_token;         // empty: DDP_JOB_TOKEN
  // A store to meet in instead of the init method (tests, embedders); rank and world_size
  // must then be given.
  std::shared_ptr<rdzv::Store> store;
};

// Rank and size as the environment describes them (see the order above); -1 when unknown.
using EnvRanks = comm::EnvRanks;
EnvRanks ranks_from_env();

// Builds the default group. InvalidArgument when one exists already.
comm::ProcessGroupPtr init_process_group(const InitOptions& options = {});
bool is_initialized();
// The default group; NotInitialized (an InvalidArgument) when init_process_group was not called.
comm::ProcessGroupPtr default_group();
// A subgroup of the default group: see GroupFactory::new_group for the contract.
comm::ProcessGroupPtr new_group(const std::vector<int>& ranks, const comm::NewGroupOptions& options = {});
// Drops the default group (groups the caller still holds live until released). The rank hosting the store
// waits (bounded) for the others to leave first, so nobody loses the store mid-teardown. Never throws; a
// no-op when not initialized.
void destroy_process_group() noexcept;

}  // namespace ddp
