#include "comm/tcp/shm_exchange_direct.h"

#include <sched.h>

#include <algorithm>

#include "comm/copy_kernel.h"
#include "comm/reduce_kernels.h"
#include "comm/tcp/shm_allreduce_direct.h"
#include "comm/tcp/shm_exchange_cross.h"
#include "comm/tcp/shm_region.h"

namespace ddp::comm::tcp {
namespace {

// Between chunks, the CPU goes to any thread waiting for it: in a hierarchical all_reduce whose
// steps overlap, this rank's step across hosts (its sockets' copies) runs beside this pass, and
// the pass of a large segment, left to run, would hold the CPU for milliseconds while the link
// idles. With nothing else to run it returns at once (one syscall per slot-sized chunk).
void give_way() { ::sched_yield(); }

size_t chunk_of(const ShmChannel& ch, DType t) {
  return std::max<size_t>(1, ch.geometry().slot_bytes / dtype_size(t));
}

// This rank's block of every rank's input (the view), reduced into its output.
void reduce_block_direct(const ShmChannel& ch, const ShmStep& s) {
  const Buffer& out = s.out;
  const size_t es = dtype_size(out.dtype), n = out.count;
  const size_t first = static_cast<size_t>(ch.rank()) * n * es;  // this rank's block, in bytes
  const std::vector<char*>& bufs = s.direct->bufs;
  const size_t chunk = chunk_of(ch, out.dtype);
  for (size_t off = 0; off < n; off += chunk) {
    const size_t m = std::min(chunk, n - off);
    char* dst = at(out, off);
    const char* own = bufs[static_cast<size_t>(ch.rank())] + first + off * es;
    if (dst != own) copy_bytes(dst, own, m * es);
    for (int p = 0; p < ch.world(); ++p) {
      if (p != ch.rank())
        combine(dst, bufs[static_cast<size_t>(p)] + first + off * es, m, out.dtype, s.ctx.desc.rop);
    }
    if (s.ctx.desc.rop == ReduceOp::kAvg) finish_avg(dst, m, out.dtype, ch.world());
    give_way();
  }
}

// This rank's input into its block of every rank's output (the view).
void scatter_input(const ShmChannel& ch, const ShmStep& s) {
  const Buffer& in = s.in;
  const size_t es = dtype_size(in.dtype), n = in.count;
  const size_t first = static_cast<size_t>(ch.rank()) * n * es;
  const std::vector<char*>& bufs = s.direct->bufs;
  const size_t chunk = chunk_of(ch, in.dtype);
  for (size_t off = 0; off < n; off += chunk) {
    const size_t m = std::min(chunk, n - off);
    const char* from = at(in, off);
    for (int p = 0; p < ch.world(); ++p) {
      char* dst = bufs[static_cast<size_t>(p)] + first + off * es;
      if (dst != from) copy_bytes(dst, from, m * es);
    }
    give_way();
  }
}

}  // namespace

bool reduce_scatter_direct_step(ShmChannel& ch, ShmStep& s) {
  return direct_step(
      ch, s, [&] { return reduce_scatter_cross_step(ch, s); }, [&] { reduce_block_direct(ch, s); });
}

bool all_gather_direct_step(ShmChannel& ch, ShmStep& s) {
  return direct_step(
      ch, s, [&] { return all_gather_cross_step(ch, s); }, [&] { scatter_input(ch, s); });
}

}  // namespace ddp::comm::tcp
