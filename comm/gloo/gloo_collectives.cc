#include "comm/gloo/gloo_collectives.h"

#include <cstring>
#include <functional>
#include <vector>

#include <gloo/allgather.h>
#include <gloo/allreduce.h>
#include <gloo/alltoall.h>
#include <gloo/barrier.h>
#include <gloo/broadcast.h>
#include <gloo/gather.h>
#include <gloo/reduce.h>
#include <gloo/scatter.h>

#include "comm/reduce_kernels.h"
#include "common/error.h"

namespace ddp::comm::gloo_backend {
namespace {

uint8_t* bytes(const Buffer& b) { return static_cast<uint8_t*>(b.data); }

// Gloo's reduce function, c[i] = a[i] op b[i], over the shared kernels (Gloo passes c == a or
// c == b, and byte offsets with no alignment promise; the kernels take both). The op was
// validated by ProcessGroup::check_reduce; asking for an undefined one is an InvalidArgument.
std::function<void(void*, const void*, const void*, size_t)> reduce_fn(DType dtype, ReduceOp op) {
  if (is_bitwise(op) && !is_integer(dtype)) {
    DDP_THROW(InvalidArgument, "reduce: bitwise ops need an integer dtype, got ", to_string(dtype));
  }
  return [dtype, op](void* c, const void* a, const void* b, size_t n) { combine3(c, a, b, n, dtype, op); };
}

// Gloo sizes reductions by sizeof(T); an unsigned integer of the element's width carries it.
template <typename F>
void with_width(const Buffer& b, F&& f) {
  switch (dtype_size(b.dtype)) {
    case 1: return f(static_cast<uint8_t*>(b.data));
    case 2: return f(static_cast<uint16_t*>(b.data));
    case 4: return f(static_cast<uint32_t*>(b.data));
    case 8: return f(static_cast<uint64_t*>(b.data));
    default: DDP_THROW(InvalidArgument, "gloo: unsupported element size ", dtype_size(b.dtype));
  }
}

// The reduction of `input` (or of `inout` in place when input is null) into `inout`.
void allreduce_into(const OpArgs& a, const Buffer* input, const Buffer& inout, ReduceOp op) {
  ::gloo::AllreduceOptions o(a.context);
  with_width(inout, [&](auto* out) {
    using T = std::remove_pointer_t<decltype(out)>;
    if (input != nullptr) o.setInput(static_cast<T*>(input->data), input->count);
    o.setOutput(out, inout.count);
  });
  o.setReduceFunction(reduce_fn(inout.dtype, op));
  o.setTag(a.tag);
  o.setTimeout(a.timeout);
  ::gloo::allreduce(o);
}

// A Gloo collective that moves bytes (allgather, alltoall): the whole input and output as
// bytes, with the op's tag and timeout.
template <typename Options>
void run_bytes(const OpArgs& a, const Buffer& input, const Buffer& output, void (*collective)(Options&)) {
  Options o(a.context);
  o.setInput(bytes(input), input.bytes());
  o.setOutput(bytes(output), output.bytes());
  o.setTag(a.tag);
  o.setTimeout(a.timeout);
  collective(o);
}

}  // namespace

void run_broadcast(const OpArgs& a, const Buffer& buf, int root) {
  ::gloo::BroadcastOptions o(a.context);
  o.setOutput(bytes(buf), buf.bytes());
  o.setRoot(root);
  o.setTag(a.tag);
  o.setTimeout(a.timeout);
  ::gloo::broadcast(o);
}

void run_all_reduce(const OpArgs& a, const Buffer& buf, ReduceOp op) {
  allreduce_into(a, nullptr, buf, op);
  if (op == ReduceOp::kAvg) finish_avg(buf.data, buf.count, buf.dtype, a.context->size);
}

void run_reduce(const OpArgs& a, const Buffer& buf, int root, ReduceOp op) {
  const bool is_root = a.context->rank == root;
  std::vector<uint8_t> scratch(is_root ? 0 : buf.bytes());
  ::gloo::ReduceOptions o(a.context);
  with_width(buf, [&](auto* data) {
    using T = std::remove_pointer_t<decltype(data)>;
    o.setInput(data, buf.count);
    o.setOutput(is_root ? data : reinterpret_cast<T*>(scratch.data()), buf.count);
  });
  o.setRoot(root);
  o.setReduceFunction(reduce_fn(buf.dtype, op));
  o.setTag(a.tag);
  o.setTimeout(a.timeout);
  ::gloo::reduce(o);
  if (is_root && op == ReduceOp::kAvg) finish_avg(buf.data, buf.count, buf.dtype, a.context->size);
}

void run_all_gather(const OpArgs& a, const Buffer& input, const Buffer& output) {
  run_bytes<::gloo::AllgatherOptions>(a, input, output, ::gloo::allgather);
}

void run_gather(const OpArgs& a, const Buffer& input, const Buffer& output, int root) {
  ::gloo::GatherOptions o(a.context);
  o.setInput(bytes(input), input.bytes());
  if (a.context->rank == root) o.setOutput(bytes(output), output.bytes());
  o.setRoot(root);
  o.setTag(a.tag);
  o.setTimeout(a.timeout);
  ::gloo::gather(o);
}

void run_scatter(const OpArgs& a, const Buffer& input, const Buffer& output, int root) {
  ::gloo::ScatterOptions o(a.context);
  if (a.context->rank == root) {
    std::vector<uint8_t*> parts;
    parts.reserve(a.context->size);
    for (int r = 0; r < a.context->size; ++r) parts.push_back(bytes(input) + r * output.bytes());
    o.setInputs(parts, output.bytes());
  }
  o.setOutput(bytes(output), output.bytes());
  o.setRoot(root);
  o.setTag(a.tag);
  o.setTimeout(a.timeout);
  ::gloo::scatter(o);
}

void run_reduce_scatter(const OpArgs& a, const Buffer& input, const Buffer& output, ReduceOp op) {
  // Gloo's options-style API has no reduce_scatter: reduce everything, keep our slice. The
  // input stays untouched (it is the allreduce's input, the scratch its output).
  std::vector<uint8_t> scratch(input.bytes());
  Buffer whole = input;
  whole.data = scratch.data();
  allreduce_into(a, &input, whole, op);
  std::memcpy(output.data, scratch.data() + static_cast<size_t>(a.context->rank) * output.bytes(),
              output.bytes());
  if (op == ReduceOp::kAvg) finish_avg(output.data, output.count, output.dtype, a.context->size);
}

void run_all_to_all(const OpArgs& a, const Buffer& input, const Buffer& output) {
  run_bytes<::gloo::AlltoallOptions>(a, input, output, ::gloo::alltoall);
}

void run_barrier(const OpArgs& a) {
  ::gloo::BarrierOptions o(a.context);
  o.setTag(a.tag);
  o.setTimeout(a.timeout);
  ::gloo::barrier(o);
}

}  // namespace ddp::comm::gloo_backend
