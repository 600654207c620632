// alltoall_base with unequal splits. Our all_to_all moves equal blocks, so: every rank's input
// and output splits are all-gathered first (blocking, small), checked to pair up (what rank i
// sends j is what j expects from i) on every rank alike, then every block is padded to the
// largest split anywhere, moved with one all_to_all, and unpacked into the output on completion.
#include <ATen/Functions.h>

#include <algorithm>
#include <numeric>

#include "common/error.h"
#include "ddp/torch/python/tensor_lists.h"
#include "ddp/torch/python/torch_process_group.h"
#include "ddp/torch/python/torch_work.h"

namespace ddp::torch {
namespace {

constexpr const char* kAlltoallOp = "alltoall_base";

// Elements per row of dimension 0.
int64_t row_elements(const at::Tensor& t) {
  int64_t n = 1;
  for (int64_t d = 1; d < t.dim(); ++d) n *= t.size(d);
  return n;
}

// The given splits, or equal ones; checked against the tensor's rows.
std::vector<int64_t> splits_of(const std::vector<int64_t>& given, const at::Tensor& t, int size,
                               const char* which) {
  const int64_t rows = t.dim() == 0 ? 1 : t.size(0);
  if (given.empty()) {
    if (rows % size != 0) {
      DDP_THROW(InvalidArgument, "ddp backend ", kAlltoallOp, ": ", which, " has ", rows,
                " rows, not divisible by ", size, " ranks (pass split sizes)");
    }
    return std::vector<int64_t>(size, rows / size);
  }
  if (static_cast<int>(given.size()) != size) {
    DDP_THROW(InvalidArgument, "ddp backend ", kAlltoallOp, ": ", which, " splits list ", given.size(),
              " sizes for ", size, " ranks");
  }
  if (std::any_of(given.begin(), given.end(), [](int64_t s) { return s < 0; }) ||
      std::accumulate(given.begin(), given.end(), int64_t{0}) != rows) {
    DDP_THROW(InvalidArgument, "ddp backend ", kAlltoallOp, ": ", which, " splits do not add up to its ",
              rows, " rows");
  }
  return given;
}

// Row r of the result: rank r's input splits, then its output splits.
at::Tensor all_splits(comm::ProcessGroup& group, const std::vector<int64_t>& in,
                      const std::vector<int64_t>& out, Millis timeout) {
  const int size = group.size();
  at::Tensor mine = at::empty({2 * size}, at::kLong);
  std::copy(in.begin(), in.end(), mine.data_ptr<int64_t>());
  std::copy(out.begin(), out.end(), mine.data_ptr<int64_t>() + size);
  at::Tensor every = at::empty({size, 2 * size}, at::kLong);
  group.all_gather(view_of(mine, kAlltoallOp), view_of(every, kAlltoallOp), {timeout})->wait();
  return every;
}

void check_pairs(const at::Tensor& every, int size) {
  auto m = every.accessor<int64_t, 2>();
  for (int i = 0; i < size; ++i) {
    for (int j = 0; j < size; ++j) {
      if (m[i][j] != m[j][size + i]) {
        DDP_THROW(InvalidArgument, "ddp backend ", kAlltoallOp, ": rank ", i, " sends ", m[i][j],
                  " rows to rank ", j, ", which expects ", m[j][size + i]);
      }
    }
  }
}

}  // namespace

c10::intrusive_ptr<c10d::Work> TorchProcessGroup::alltoall_uneven(at::Tensor& output, at::Tensor& input,
                                                                  const std::vector<int64_t>& output_splits,
                                                                  const std::vector<int64_t>& input_splits,
                                                                  const c10d::AllToAllOptions& opts) {
  const int size = getSize();
  view_of(input, kAlltoallOp);  // contiguous, supported dtype and device, or an error now
  view_of(output, kAlltoallOp);
  if (input.scalar_type() != output.scalar_type() || row_elements(input) != row_elements(output)) {
    DDP_THROW(InvalidArgument, "ddp backend ", kAlltoallOp, ": input and output differ in dtype or row size");
  }
  const auto in = splits_of(input_splits, input, size, "input");
  const auto out = splits_of(output_splits, output, size, "output");
  const at::Tensor every = all_splits(*group_, in, out, timeout_of(opts.timeout));
  check_pairs(every, size);
  const int64_t row = row_elements(input);
  const int64_t block = every.max().item<int64_t>() * row;
  at::Tensor in_flat = input.reshape({-1});
  at::Tensor out_flat = output.view({-1});
  at::Tensor padded_in = at::zeros({size * block}, input.options());
  at::Tensor padded_out = at::empty({size * block}, input.options());
  for (int64_t j = 0, offset = 0; j < size; offset += in[j] * row, ++j) {
    padded_in.narrow(0, j * block, in[j] * row).copy_(in_flat.narrow(0, offset, in[j] * row));
  }
  auto work =
      c10::make_intrusive<TorchWork>(getRank(), c10d::OpType::ALLTOALL_BASE, std::vector<at::Tensor>{output},
                                     std::vector<at::Tensor>{input, padded_in, padded_out});
  auto ours = group_->all_to_all(view_of(padded_in, kAlltoallOp), view_of(padded_out, kAlltoallOp),
                                 {timeout_of(opts.timeout)});
  TorchWork::track(work, {ours}, [=] {
    for (int64_t i = 0, offset = 0; i < size; offset += out[i] * row, ++i) {
      out_flat.narrow(0, offset, out[i] * row).copy_(padded_out.narrow(0, i * block, out[i] * row));
    }
  });
  return work;
}

}  // namespace ddp::torch
