#pragma once
// Multi-buffer collectives on a host backend (tcp, gloo, mpi; ProcessGroup's default do_…_multi),
// built on the group's own single-buffer ops, in this order on every rank:
//   1. agree: a small synchronous all_gather of each rank's list shape (length, count, dtype,
//      root index, reduce op); a rank whose shape differs from rank 0's is an InvalidArgument
//      naming the op, the rank and the field, thrown on every rank (nobody is left waiting);
//   2. reduce (or pack) the process's K buffers locally with the shared kernels
//      (comm/reduce_kernels.h), in host memory;
//   3. ONE collective across processes on that buffer;
//   4. when it completes, fan the result out to every buffer that needs it (AVG: divide once by
//      world × K first). The returned Work completes after step 4.
// Buffers are host views (a CUDA staging decorator hands pinned copies to these). Steps 1 and 2
// run on the calling thread; step 4 on the thread that completes the collective.
#include <cstdint>
#include <span>
#include <string>

#include "comm/process_group.h"

namespace ddp::comm::multi {

// What every rank's list must agree on; -1 where a field does not apply to the op.
struct ListShape {
  int64_t length = 0;
  int64_t count = 0;
  int64_t dtype = -1;
  int64_t root_index = -1;
  int64_t op = -1;
  bool operator==(const ListShape&) const = default;
};
ListShape shape_of(std::span<const Buffer> list, int root_index = -1, int op = -1);

// "" when every row equals row 0; else which rank differs from rank 0, in which field, with both
// values ("rank 2 has list length 3 where rank 0 has 2"). rows[r] is rank r's shape.
std::string find_mismatch(std::span<const ListShape> rows);
// Exchanges `mine` with every rank and throws InvalidArgument "<op>: <find_mismatch>" on every
// rank when they differ. Synchronous; a missing rank is the all_gather's TimeoutError.
void agree(ProcessGroup& pg, const char* op, const ListShape& mine, Millis timeout);

// dst = op over every buffer of `srcs` (AVG sums). dst may be one of srcs, else overlaps none.
void reduce_into(const Buffer& dst, std::span<const Buffer> srcs, ReduceOp op);
// Copies src into every buffer of dsts (skipping src itself when it is one of them).
void fan_out(const Buffer& src, std::span<const Buffer> dsts);
// Copies the buffers one after the other into dst (which holds their total).
void pack(std::span<const Buffer> srcs, const Buffer& dst);

WorkPtr all_reduce(ProcessGroup& pg, std::span<const Buffer> buffers, AllReduceOptions opts);
WorkPtr broadcast(ProcessGroup& pg, std::span<const Buffer> buffers, BroadcastMultiOptions opts);
WorkPtr reduce(ProcessGroup& pg, std::span<const Buffer> buffers, ReduceMultiOptions opts);
WorkPtr all_gather(ProcessGroup& pg, std::span<const Buffer> inputs, std::span<const Buffer> outputs,
                   AllGatherOptions opts);

}  // namespace ddp::comm::multi
