#pragma once
// Cross-memory attach (CMA): copies between this process's memory and a peer process's, by pid
// and address, in one kernel copy (process_vm_readv / process_vm_writev), as Open MPI's shared
// memory transport does for large messages. The all_reduce of buffers private to each rank uses
// it (shm_allreduce_cross.h): each element is read once from each rank and written once to
// each, where staging through shared slots copies it twice more. The kernel allows it where the
// caller could ptrace the peer (the same user; under Yama's ptrace_scope 1 only a process the
// peer named: prctl(PR_SET_PTRACER)), and containers may forbid it (seccomp): so each rank tests
// every peer before use (cross_reachable), and the group uses CMA only where every rank reaches
// every peer. DDP_TCP_CMA: auto (where measured faster: shm_store_choice.h), on (under Yama this
// process then lets any process of its user attach, as Open MPI does), off.
#include <cstddef>
#include <cstdint>
#include <string>

namespace ddp::comm::tcp {

// DDP_TCP_CMA's choices, in the table's order (settings::choice_as).
enum class CrossSetting { kAuto, kOn, kOff };

// What this process shows its peers: a word at `addr` that holds `value` (random, per process).
struct CrossProbe {
  int32_t pid = 0;
  uint64_t addr = 0;
  uint64_t value = 0;
};
CrossProbe cross_probe();

// Under Yama's ptrace_scope 1, lets any process of this user attach (PR_SET_PTRACER_ANY);
// nothing elsewhere. Returns false when the setting was refused.
bool allow_cross_memory_peers();

// Whether this process can read the peer's probe word and finds its value there.
bool cross_reachable(const CrossProbe& peer);

// Copies `bytes` from the peer's `remote` address into `local`, or from `local` to `remote`,
// retrying partial copies. 0 on success, else the errno (ESRCH: the process is gone; EFAULT:
// the range is not mapped there; EPERM: not allowed).
int cross_read(int32_t pid, uint64_t remote, void* local, size_t bytes);
int cross_write(int32_t pid, const void* local, uint64_t remote, size_t bytes);

}  // namespace ddp::comm::tcp
