#pragma once
// The c10d side of an op, checked and turned into what our ProcessGroup takes: the one tensor of
// a per-device list, reduce ops, timeouts, and the lists of world_size tensors that gather,
// scatter and friends use, laid out as one flat buffer and back.
//
// Every check throws InvalidArgument naming the c10d op and what is wrong (a list of the wrong
// length, a tensor whose size or dtype differs, PREMUL_SUM, ...); nothing here blocks or talks
// to peers. Copies happen only where c10d's list layout differs from our flat buffers.
#include <ATen/core/Tensor.h>
#include <torch/csrc/distributed/c10d/Types.hpp>

#include <vector>

#include "comm/types.h"
#include "common/timeouts.h"

namespace ddp::torch {

// c10d passes one tensor per device; we take one device per process.
const at::Tensor& only_tensor(const std::vector<at::Tensor>& tensors, const char* op);
// buffer_of() with the op named in its errors.
comm::Buffer view_of(const at::Tensor& tensor, const char* op);
// An empty view of the same dtype and device (non-roots of gather/scatter).
comm::Buffer empty_like_view(const at::Tensor& tensor, const char* op);

comm::ReduceOp reduce_op_of(const c10d::ReduceOp& op, const char* name);
// c10d's kUnsetTimeout (-1) is our kUseDefault (-1): the group's timeout.
inline Millis timeout_of(std::chrono::milliseconds timeout) {
  return timeout.count() < 0 ? kUseDefault : timeout;
}
int root_of(int64_t root_rank, int64_t root_tensor, int size, const char* op);

// A list of `size` tensors, each with like's dtype, device and number of elements.
void check_list(const std::vector<at::Tensor>& list, const at::Tensor& like, int size, const char* op);
// The list laid end to end in one new contiguous tensor.
at::Tensor flatten_list(const std::vector<at::Tensor>& list);
// An uninitialised flat tensor for `size` copies of like.
at::Tensor flat_for(const at::Tensor& like, int size);
// Copies consecutive slices of flat into the list's tensors (any strides).
void unflatten_into(const at::Tensor& flat, const std::vector<at::Tensor>& list);

}  // namespace ddp::torch
