#include "ddp/torch/python/tensor_lists.h"

#include <ATen/Functions.h>

#include <string>

#include "common/error.h"
#include "ddp/torch/tensor_buffer.h"

namespace ddp::torch {

const at::Tensor& only_tensor(const std::vector<at::Tensor>& tensors, const char* op) {
  if (tensors.size() != 1) {
    DDP_THROW(InvalidArgument, "ddp backend ", op,
              ": expects exactly one tensor per call (one device per process), got ", tensors.size());
  }
  return tensors.front();
}

comm::Buffer view_of(const at::Tensor& tensor, const char* op) {
  return buffer_of(tensor, std::string("ddp backend ") + op);
}

comm::Buffer empty_like_view(const at::Tensor& tensor, const char* op) {
  comm::Buffer b = view_of(tensor, op);
  b.count = 0;
  b.data = nullptr;
  return b;
}

comm::ReduceOp reduce_op_of(const c10d::ReduceOp& op, const char* name) {
  switch (op.op_) {
    case c10d::ReduceOp::SUM: return comm::ReduceOp::kSum;
    case c10d::ReduceOp::AVG: return comm::ReduceOp::kAvg;
    case c10d::ReduceOp::PRODUCT: return comm::ReduceOp::kProduct;
    case c10d::ReduceOp::MIN: return comm::ReduceOp::kMin;
    case c10d::ReduceOp::MAX: return comm::ReduceOp::kMax;
    case c10d::ReduceOp::BAND: return comm::ReduceOp::kBand;
    case c10d::ReduceOp::BOR: return comm::ReduceOp::kBor;
    case c10d::ReduceOp::BXOR: return comm::ReduceOp::kBxor;
    default:
      DDP_THROW(InvalidArgument, "ddp backend ", name, ": reduce op ", static_cast<int>(op.op_),
                " (PREMUL_SUM) is not supported (SUM, AVG, PRODUCT, MIN, MAX, BAND, BOR, BXOR)");
  }
}

int root_of(int64_t root_rank, int64_t root_tensor, int size, const char* op) {
  if (root_tensor != 0) {
    DDP_THROW(InvalidArgument, "ddp backend ", op, ": root tensor ", root_tensor,
              " (one tensor per process: 0)");
  }
  if (root_rank < 0 || root_rank >= size) {
    DDP_THROW(InvalidArgument, "ddp backend ", op, ": root rank ", root_rank, " is outside [0, ", size, ")");
  }
  return static_cast<int>(root_rank);
}

void check_list(const std::vector<at::Tensor>& list, const at::Tensor& like, int size, const char* op) {
  if (static_cast<int>(list.size()) != size) {
    DDP_THROW(InvalidArgument, "ddp backend ", op, ": the tensor list holds ", list.size(),
              " tensors, the group has ", size, " ranks");
  }
  for (size_t i = 0; i < list.size(); ++i) {
    const at::Tensor& t = list[i];
    if (!t.defined() || t.numel() != like.numel() || t.scalar_type() != like.scalar_type() ||
        t.device() != like.device()) {
      DDP_THROW(InvalidArgument, "ddp backend ", op, ": tensor ", i, " of the list (",
                t.defined() ? c10::toString(t.scalar_type()) : "undefined", ", ", t.defined() ? t.numel() : 0,
                " elements) does not match ", c10::toString(like.scalar_type()), " with ", like.numel(),
                " elements");
    }
  }
}

at::Tensor flatten_list(const std::vector<at::Tensor>& list) {
  std::vector<at::Tensor> flat;
  flat.reserve(list.size());
  for (const auto& t : list) flat.push_back(t.reshape({-1}));
  return at::cat(flat);
}

at::Tensor flat_for(const at::Tensor& like, int size) {
  return at::empty({static_cast<int64_t>(size) * like.numel()}, like.options());
}

void unflatten_into(const at::Tensor& flat, const std::vector<at::Tensor>& list) {
  int64_t offset = 0;
  for (const auto& t : list) {
    const int64_t n = t.numel();
    t.copy_(flat.narrow(0, offset, n).view(t.sizes()));
    offset += n;
  }
}

}  // namespace ddp::torch
