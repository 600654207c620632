#pragma once
// The public entry point of the collectives, as torch.distributed offers it:
//
//   ddp::init_process_group({.backend = "tcp"});       // env:// by default
//   auto pg = ddp::default_group();
//   pg->all_reduce(ddp::comm::view(grad.data(), grad.size()))->wait();
//   auto evens = ddp::new_group({0, 2});               // every rank calls; non-members get nullptr
//   ddp::destroy_process_group();
//
// Init methods (one per process; ranks and sizes resolved in this order: the options, the URL's
// ?rank=&world_size=, RANK/WORLD_SIZE, OMPI_COMM_WORLD_RANK/SIZE, SLURM_PROCID/NTASKS):
// - env://   DDP_STORE when set: host:port (the launcher's store), or etcd://members/prefix/ (etcd
//            itself, --rdzv-backend etcd: rendezvous/store_url.h); else rank 0 hosts a TCPStore on
//            MASTER_ADDR:MASTER_PORT and the others connect; a world of one needs no store, and
//            the mpi backend runs without one (MPI_COMM_WORLD is the rendezvous).
// - tcp://host:port?rank=R&world_size=N   rank 0 hosts the store at host:port.
// - tcp://239.x.y.z:PORT?world_size=N&group_name=G (or [ff15::...]:PORT)   multicast discovery:
//            ranks assigned when not given, the rank-0 process hosts a store on an ephemeral port
//            and announces it (rendezvous/multicast_rendezvous.h); ttl=, interface=, timeout=.
// - file:///path                          a FileStore shared by every rank.
// Keys live under "run/<DDP_RUN_ID>/<DDP_ELASTIC_ROUND>/<TORCHELASTIC_RESTART_COUNT>/<init #>" so
// a restarted worker never reads keys of the round or attempt before it.
//
// Timeouts: options.timeout, else DDP_TIMEOUT_MS, else kDefaultCollectiveTimeout. A timeout given
// (option or variable) also bounds reaching a TCP store, its handshake included. The job token
// (options, else DDP_JOB_TOKEN) authenticates store and backend connections.
// Errors: InvalidArgument for bad options/environment (naming the variable), TimeoutError when
// the peers do not arrive in time, and whatever the backend raises. Thread-safe; the functions
// here manage one process-wide default group (GroupFactory offers the same without globals).
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
