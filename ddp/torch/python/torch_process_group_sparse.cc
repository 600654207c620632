// allreduce of a sparse COO tensor (SUM), as c10d's Gloo group does it: every rank's count of
// non-zeros is all-gathered, then its indices and values (padded to the largest count), and each
// rank adds every rank's part. Blocking in the call: the counts must be known before the rest moves.
#include <ATen/Functions.h>

#include "common/error.h"
#include "ddp/torch/python/tensor_lists.h"
#include "ddp/torch/python/torch_process_group.h"
#include "ddp/torch/python/torch_work.h"

namespace ddp::torch {
namespace {

constexpr const char* kSparseOp = "allreduce (sparse)";

// Every rank's `mine` (same shape on every rank), stacked along a new dimension 0.
at::Tensor gather_all(comm::ProcessGroup& group, const at::Tensor& mine, Millis timeout) {
  std::vector<int64_t> shape{group.size()};
  shape.insert(shape.end(), mine.sizes().begin(), mine.sizes().end());
  at::Tensor all = at::empty(shape, mine.options());
  group.all_gather(view_of(mine, kSparseOp), view_of(all, kSparseOp), {timeout})->wait();
  return all;
}

}  // namespace

c10::intrusive_ptr<c10d::Work> TorchProcessGroup::allreduce_sparse(at::Tensor& tensor,
                                                                   const c10d::AllreduceOptions& opts) {
  if (opts.reduceOp != c10d::ReduceOp::SUM) {
    DDP_THROW(InvalidArgument, "ddp backend ", kSparseOp, ": only SUM reduces sparse tensors");
  }
  if (!tensor.device().is_cpu()) DDP_THROW(InvalidArgument, "ddp backend ", kSparseOp, ": CPU tensors only");
  const Millis timeout = timeout_of(opts.timeout);
  at::Tensor in = tensor.coalesce();
  const at::Tensor indices = in._indices().contiguous();  // sparse_dim x nnz
  const at::Tensor values = in._values().contiguous();    // nnz x dense sizes
  const at::Tensor counts = gather_all(*group_, at::full({1}, in._nnz(), at::kLong), timeout);
  const int64_t most = counts.max().item<int64_t>();
  at::Tensor padded_indices = at::zeros({indices.size(0), most}, indices.options());
  padded_indices.narrow(1, 0, in._nnz()).copy_(indices);
  std::vector<int64_t> value_shape{most};
  value_shape.insert(value_shape.end(), values.sizes().begin() + 1, values.sizes().end());
  at::Tensor padded_values = at::zeros(value_shape, values.options());
  padded_values.narrow(0, 0, in._nnz()).copy_(values);
  const at::Tensor all_indices = gather_all(*group_, padded_indices, timeout);
  const at::Tensor all_values = gather_all(*group_, padded_values, timeout);
  at::Tensor sum = at::zeros(tensor.sizes(), tensor.options());  // sparse, no non-zeros
  for (int r = 0; r < getSize(); ++r) {
    const int64_t n = counts[r][0].item<int64_t>();
    sum = sum + at::sparse_coo_tensor(all_indices[r].narrow(1, 0, n), all_values[r].narrow(0, 0, n),
                                      tensor.sizes(), tensor.options());
  }
  tensor.copy_(sum.coalesce());
  auto work =
      c10::make_intrusive<TorchWork>(getRank(), c10d::OpType::ALLREDUCE, std::vector<at::Tensor>{tensor});
  TorchWork::track(work, {});
  return work;
}

}  // namespace ddp::torch
