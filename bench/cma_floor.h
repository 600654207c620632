#pragma once
// The least a 2-rank all_reduce of buffers private to each rank (a program's own tensors, not
// group memory) can cost on this machine when the data crosses through the kernel: two processes,
// one per CPU, each with its own float32 buffer at the same address. Each reduces its half, chunk
// after chunk: process_vm_readv of the peer's copy into a scratch buffer (in its cache), add into
// its own copy, process_vm_writev of the sum into the peer's. Nothing waits beyond a common start,
// so what is timed is the data movement alone, which the tcp backend's cross-memory all_reduce
// (comm/tcp/shm_allreduce_cross.h) pays plus its own synchronisation. The copies go through the
// same thin wrappers of the system calls (comm/tcp/cross_memory.h), not the backend's all_reduce;
// floors_bench.cc sets this floor beside the 2-thread `a += b` pass.
#include <cstddef>
#include <string>
#include <utility>
#include <vector>

namespace ddp::bench {

struct CmaFloorOptions {
  size_t bytes = 0;  // each process's buffer: whole floats, at least two
  int repeats = 21;
  std::pair<int, int> cpus{0, 0};  // process 0 on the first, process 1 on the second
  size_t chunk_bytes = 0;          // 0: cma_chunk_bytes(this machine's L2); at most a half
};

struct CmaFloor {
  std::vector<double> samples_us;  // one per repeat; empty: not measured here, and `why` says why
  std::string why;
  size_t chunk_bytes = 0;  // the chunk used (a whole number of floats, at most a half)
};

// Forks the two processes, times `repeats` passes from a common start until both are done, and
// checks every element of both buffers afterwards. Not measured (no samples) where the kernel
// refuses the copies (EPERM, EACCES, ENOSYS: Yama, seccomp, another user), with the reason.
// std::runtime_error, naming the process, when a sum is wrong, a copy fails otherwise, or a
// process dies.
CmaFloor cma_floor(const CmaFloorOptions& options);

// The chunk for an L2 of `l2_bytes`: a quarter of it (the scratch and the own chunk stay in
// cache), 64 KiB to 1 MiB; 256 KiB when the L2 is unknown (0).
size_t cma_chunk_bytes(size_t l2_bytes);

}  // namespace ddp::bench
