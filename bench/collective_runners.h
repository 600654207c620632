#pragma once
// The collective implementations `ddp-bench collective` measures, behind one interface:
// ours (any backend of the registry, through init_process_group), and the peers called
// directly: Gloo's own algorithms over its own TCP device ("gloo-direct") and Open MPI
// ("mpi-direct", run under mpirun). All on float32, blocking, root 0 where there is a root.
#include <cstddef>
#include <memory>
#include <string>

namespace ddp::bench {

enum class CollOp { kAllReduce, kBroadcast, kAllGather, kReduceScatter };
CollOp parse_coll_op(const std::string& name);  // InvalidArgument lists the choices
const char* to_string(CollOp op);

class CollectiveRunner {
 public:
  virtual ~CollectiveRunner() = default;
  virtual int rank() const = 0;
  virtual int size() const = 0;
  // all_reduce, broadcast: in place on `in` (count elements). all_gather: `in` (count) -> `out`
  // (count x size). reduce_scatter: `in` (count x size) -> `out` (count), summed.
  virtual void run(CollOp op, float* in, float* out, size_t count) = 0;
  virtual void barrier() = 0;
};

// backend: a registry name ("tcp", "gloo", "mpi", "nccl"), "gloo-direct" or "mpi-direct".
// Rank, size and the meeting point come from the environment (see comm/init.h).
std::unique_ptr<CollectiveRunner> make_runner(const std::string& backend);

}  // namespace ddp::bench
