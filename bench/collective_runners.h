#pragma once
// The collective implementations `ddp-bench collective` measures, behind one interface:
// ours (any backend of the registry, through init_process_group), and the peers called
// directly: Gloo's own algorithms over its own TCP device ("gloo-direct") and Open MPI
// ("mpi-direct", run under mpirun). All on float32, blocking, root 0 where there is a root.
// Buffers are host memory, or CUDA device memory for ours (nccl; tcp and gloo stage them
// through the host) when RunnerOptions::memory says so; the peers take host memory only.
#include <cstddef>
#include <memory>
#include <string>

#include "bench/bench_buffer.h"

namespace ddp::bench {

// The ProcessGroup collectives nccl-tests measures.
enum class CollOp {
  kAllReduce,
  kBroadcast,
  kReduce,
  kAllGather,
  kGather,
  kScatter,
  kReduceScatter,
  kAllToAll
};
inline constexpr const char* kCollOpNames =
    "all_reduce, broadcast, reduce, all_gather, gather, scatter, reduce_scatter, all_to_all";
CollOp parse_coll_op(const std::string& name);  // InvalidArgument lists the choices
const char* to_string(CollOp op);

class CollectiveRunner {
 public:
  virtual ~CollectiveRunner() = default;
  virtual int rank() const = 0;
  virtual int size() const = 0;
  // all_reduce, broadcast, reduce: in place on `in` (count elements; reduce: the sum at the root
  // only). all_gather, gather: `in` (count) -> `out` (count x size; gather: at the root).
  // scatter: `in` (count x size, the root's) -> `out` (count). reduce_scatter: `in` (count x
  // size) -> `out` (count), summed. all_to_all: `in` -> `out`, each count x size (count per peer).
  virtual void run(CollOp op, float* in, float* out, size_t count) = 0;
  virtual void barrier() = 0;
  // Element-wise max over ranks of v[0..n), in place, through the implementation under test
  // (host doubles whatever the buffers' memory): how the harness takes the slowest rank's time.
  virtual void max_over_ranks(double* v, size_t n) = 0;
  // Memory for the buffers passed to run() (--memory group): ours, the group's
  // (ProcessGroup::allocate, collective); the peers', plain host memory.
  virtual std::shared_ptr<comm::GroupMemory> allocate(size_t bytes) { return comm::host_memory(bytes); }
  // What the implementation chose at creation that a reader of its figures should know (one
  // line; empty: nothing).
  virtual std::string choices() const { return {}; }
};

struct RunnerOptions {
  std::string backend = "tcp";  // a registry name ("tcp", "gloo", "mpi", "nccl"), "gloo-direct", "mpi-direct"
  BufferOptions memory;         // where the buffers passed to run() live
  // Ours only: buffers per process (all_reduce and broadcast through the *_multi ops). The
  // harness's buffer is the first; the runner owns the others. all_reduce zeroes them before
  // each op (a memset, timed) so the sum the harness checks stays the ranks' sum.
  int buffers = 1;
};

// Rank, size and the meeting point come from the environment (see comm/init.h).
std::unique_ptr<CollectiveRunner> make_runner(const RunnerOptions& options);

}  // namespace ddp::bench
