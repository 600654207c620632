// The ops whose c10d form takes lists of world_size tensors (and their flat "_base" forms):
// the lists are checked, laid out flat for our group, and copied back once the op is done.
#include <ATen/Functions.h>

#include <algorithm>

#include "common/error.h"
#include "ddp/torch/python/tensor_lists.h"
#include "ddp/torch/python/torch_process_group.h"
#include "ddp/torch/python/torch_work.h"

namespace ddp::torch {
namespace {

// The single list of a c10d vector-of-lists argument (one device per process).
const std::vector<at::Tensor>& only_list(const std::vector<std::vector<at::Tensor>>& lists, const char* op) {
  if (lists.size() != 1) {
    DDP_THROW(InvalidArgument, "ddp backend ", op,
              ": expects one tensor list per call (one device per process), got ", lists.size());
  }
  return lists.front();
}

// One rank's output list of allgather_coalesced: a tensor like each input, in order.
void check_coalesced_list(const std::vector<at::Tensor>& list, const std::vector<at::Tensor>& inputs,
                          const char* op) {
  if (list.size() != inputs.size()) {
    DDP_THROW(InvalidArgument, "ddp backend ", op, ": an output list holds ", list.size(), " tensors for ",
              inputs.size(), " inputs");
  }
  for (size_t i = 0; i < list.size(); ++i) {
    if (list[i].numel() != inputs[i].numel() || list[i].scalar_type() != inputs[i].scalar_type() ||
        list[i].device() != inputs[i].device()) {
      DDP_THROW(InvalidArgument, "ddp backend ", op, ": output ", i, " does not match input ", i,
                " in size, dtype or device");
    }
  }
}

bool equal_splits(const std::vector<int64_t>& splits, int64_t numel, int size) {
  if (splits.empty()) return true;
  return std::all_of(splits.begin(), splits.end(), [&](int64_t s) { return s * size == numel; });
}

}  // namespace

c10::intrusive_ptr<c10d::Work> TorchProcessGroup::allgather(std::vector<std::vector<at::Tensor>>& outputs,
                                                            std::vector<at::Tensor>& inputs,
                                                            const c10d::AllgatherOptions& opts) {
  const at::Tensor& in = only_tensor(inputs, "allgather");
  const std::vector<at::Tensor>& out = only_list(outputs, "allgather");
  check_list(out, in, getSize(), "allgather");
  at::Tensor flat = flat_for(in, getSize());
  auto work = c10::make_intrusive<TorchWork>(getRank(), c10d::OpType::ALLGATHER, out,
                                             std::vector<at::Tensor>{in, flat});
  auto ours =
      group_->all_gather(view_of(in, "allgather"), view_of(flat, "allgather"), {timeout_of(opts.timeout)});
  TorchWork::track(work, {ours}, [flat, out] { unflatten_into(flat, out); });
  return work;
}

c10::intrusive_ptr<c10d::Work> TorchProcessGroup::allgather_coalesced(
    std::vector<std::vector<at::Tensor>>& outputs, std::vector<at::Tensor>& inputs,
    const c10d::AllgatherOptions& opts) {
  constexpr const char* kOp = "allgather_coalesced";
  if (inputs.empty()) DDP_THROW(InvalidArgument, "ddp backend ", kOp, ": the input list is empty");
  if (static_cast<int>(outputs.size()) != getSize()) {
    DDP_THROW(InvalidArgument, "ddp backend ", kOp, ": ", outputs.size(), " output lists for ", getSize(),
              " ranks");
  }
  int64_t total = 0;
  for (const auto& t : inputs) {
    view_of(t, kOp);  // a dtype and device we take, contiguous
    if (t.scalar_type() != inputs.front().scalar_type()) {
      DDP_THROW(InvalidArgument, "ddp backend ", kOp, ": inputs differ in dtype (",
                inputs.front().scalar_type(), " and ", t.scalar_type(), ")");
    }
    total += t.numel();
  }
  for (const auto& list : outputs) check_coalesced_list(list, inputs, kOp);
  std::vector<at::Tensor> flat_inputs;
  for (const auto& t : inputs) flat_inputs.push_back(t.reshape({-1}));
  at::Tensor in = at::cat(flat_inputs);
  at::Tensor flat = at::empty({getSize() * total}, in.options());
  std::vector<at::Tensor> out;
  for (const auto& list : outputs) out.insert(out.end(), list.begin(), list.end());
  auto work = c10::make_intrusive<TorchWork>(getRank(), c10d::OpType::ALLGATHER_COALESCED, out,
                                             std::vector<at::Tensor>{in, flat});
  auto ours = group_->all_gather(view_of(in, kOp), view_of(flat, kOp), {timeout_of(opts.timeout)});
  TorchWork::track(work, {ours}, [flat, out] { unflatten_into(flat, out); });
  return work;
}

c10::intrusive_ptr<c10d::Work> TorchProcessGroup::_allgather_base(at::Tensor& output, at::Tensor& input,
                                                                  const c10d::AllgatherOptions& opts) {
  auto work = c10::make_intrusive<TorchWork>(getRank(), c10d::OpType::_ALLGATHER_BASE,
                                             std::vector<at::Tensor>{output}, std::vector<at::Tensor>{input});
  TorchWork::track(work,
                   {group_->all_gather(view_of(input, "_allgather_base"), view_of(output, "_allgather_base"),
                                       {timeout_of(opts.timeout)})});
  return work;
}

c10::intrusive_ptr<c10d::Work> TorchProcessGroup::gather(std::vector<std::vector<at::Tensor>>& outputs,
                                                         std::vector<at::Tensor>& inputs,
                                                         const c10d::GatherOptions& opts) {
  const at::Tensor& in = only_tensor(inputs, "gather");
  const int root = root_of(opts.rootRank, 0, getSize(), "gather");
  std::vector<at::Tensor> out;
  at::Tensor flat;
  comm::Buffer flat_view = empty_like_view(in, "gather");
  if (getRank() == root) {
    out = only_list(outputs, "gather");
    check_list(out, in, getSize(), "gather");
    flat = flat_for(in, getSize());
    flat_view = view_of(flat, "gather");
  } else if (!outputs.empty() && !(outputs.size() == 1 && outputs.front().empty())) {
    DDP_THROW(InvalidArgument, "ddp backend gather: only the root (rank ", root, ") passes output tensors");
  }
  auto work =
      c10::make_intrusive<TorchWork>(getRank(), c10d::OpType::GATHER, out, std::vector<at::Tensor>{in, flat});
  auto ours = group_->gather(view_of(in, "gather"), flat_view, {root, timeout_of(opts.timeout)});
  if (getRank() != root) {
    TorchWork::track(work, {ours});
  } else {
    TorchWork::track(work, {ours}, [flat, out] { unflatten_into(flat, out); });
  }
  return work;
}

c10::intrusive_ptr<c10d::Work> TorchProcessGroup::scatter(std::vector<at::Tensor>& outputs,
                                                          std::vector<std::vector<at::Tensor>>& inputs,
                                                          const c10d::ScatterOptions& opts) {
  const at::Tensor& out = only_tensor(outputs, "scatter");
  const int root = root_of(opts.rootRank, 0, getSize(), "scatter");
  at::Tensor flat;
  comm::Buffer flat_view = empty_like_view(out, "scatter");
  if (getRank() == root) {
    const std::vector<at::Tensor>& in = only_list(inputs, "scatter");
    check_list(in, out, getSize(), "scatter");
    flat = flatten_list(in);
    flat_view = view_of(flat, "scatter");
  } else if (!inputs.empty() && !(inputs.size() == 1 && inputs.front().empty())) {
    DDP_THROW(InvalidArgument, "ddp backend scatter: only the root (rank ", root, ") passes input tensors");
  }
  auto work = c10::make_intrusive<TorchWork>(getRank(), c10d::OpType::SCATTER, std::vector<at::Tensor>{out},
                                             std::vector<at::Tensor>{flat});
  TorchWork::track(work,
                   {group_->scatter(flat_view, view_of(out, "scatter"), {root, timeout_of(opts.timeout)})});
  return work;
}

c10::intrusive_ptr<c10d::Work> TorchProcessGroup::reduce_scatter(std::vector<at::Tensor>& outputs,
                                                                 std::vector<std::vector<at::Tensor>>& inputs,
                                                                 const c10d::ReduceScatterOptions& opts) {
  const at::Tensor& out = only_tensor(outputs, "reduce_scatter");
  const std::vector<at::Tensor>& in = only_list(inputs, "reduce_scatter");
  check_list(in, out, getSize(), "reduce_scatter");
  const comm::ReduceOp op = reduce_op_of(opts.reduceOp, "reduce_scatter");
  at::Tensor flat = flatten_list(in);
  auto work = c10::make_intrusive<TorchWork>(getRank(), c10d::OpType::REDUCE_SCATTER,
                                             std::vector<at::Tensor>{out}, std::vector<at::Tensor>{flat});
  TorchWork::track(work,
                   {group_->reduce_scatter(view_of(flat, "reduce_scatter"), view_of(out, "reduce_scatter"),
                                           {op, timeout_of(opts.timeout)})});
  return work;
}

c10::intrusive_ptr<c10d::Work> TorchProcessGroup::_reduce_scatter_base(
    at::Tensor& output, at::Tensor& input, const c10d::ReduceScatterOptions& opts) {
  const comm::ReduceOp op = reduce_op_of(opts.reduceOp, "_reduce_scatter_base");
  auto work = c10::make_intrusive<TorchWork>(getRank(), c10d::OpType::_REDUCE_SCATTER_BASE,
                                             std::vector<at::Tensor>{output}, std::vector<at::Tensor>{input});
  TorchWork::track(work, {group_->reduce_scatter(view_of(input, "_reduce_scatter_base"),
                                                 view_of(output, "_reduce_scatter_base"),
                                                 {op, timeout_of(opts.timeout)})});
  return work;
}

c10::intrusive_ptr<c10d::Work> TorchProcessGroup::alltoall_base(at::Tensor& output, at::Tensor& input,
                                                                std::vector<int64_t>& output_splits,
                                                                std::vector<int64_t>& input_splits,
                                                                const c10d::AllToAllOptions& opts) {
  if (!equal_splits(input_splits, input.numel(), getSize()) ||
      !equal_splits(output_splits, output.numel(), getSize()) || input.numel() != output.numel()) {
    return alltoall_uneven(output, input, output_splits, input_splits, opts);
  }
  if (input.numel() % getSize() != 0) {
    DDP_THROW(InvalidArgument, "ddp backend alltoall_base: ", input.numel(),
              " elements do not split evenly over ", getSize(), " ranks (pass split sizes)");
  }
  auto work = c10::make_intrusive<TorchWork>(getRank(), c10d::OpType::ALLTOALL_BASE,
                                             std::vector<at::Tensor>{output}, std::vector<at::Tensor>{input});
  TorchWork::track(work, {group_->all_to_all(view_of(input, "alltoall_base"),
                                             view_of(output, "alltoall_base"), {timeout_of(opts.timeout)})});
  return work;
}

c10::intrusive_ptr<c10d::Work> TorchProcessGroup::alltoall(std::vector<at::Tensor>& outputs,
                                                           std::vector<at::Tensor>& inputs,
                                                           const c10d::AllToAllOptions& opts) {
  if (inputs.empty()) DDP_THROW(InvalidArgument, "ddp backend alltoall: the input list is empty");
  check_list(inputs, inputs.front(), getSize(), "alltoall");
  check_list(outputs, inputs.front(), getSize(), "alltoall");
  at::Tensor in = flatten_list(inputs);
  at::Tensor flat = flat_for(inputs.front(), getSize());
  auto work = c10::make_intrusive<TorchWork>(getRank(), c10d::OpType::ALLTOALL, outputs,
                                             std::vector<at::Tensor>{in, flat});
  auto ours =
      group_->all_to_all(view_of(in, "alltoall"), view_of(flat, "alltoall"), {timeout_of(opts.timeout)});
  TorchWork::track(work, {ours}, [flat, outputs] { unflatten_into(flat, outputs); });
  return work;
}

}  // namespace ddp::torch
