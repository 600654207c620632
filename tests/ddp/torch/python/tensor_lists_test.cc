// tensor_lists: c10d's per-device lists and reduce ops checked and laid out flat.
#include <ATen/Functions.h>
#include <doctest/doctest.h>

#include "common/error.h"
#include "ddp/torch/python/tensor_lists.h"

using namespace ddp::torch;

TEST_CASE("one tensor per call; anything else names the op") {
  std::vector<at::Tensor> two{at::zeros({2}), at::zeros({2})};
  CHECK_THROWS_WITH_AS(only_tensor(two, "allreduce"), doctest::Contains("allreduce"), ddp::InvalidArgument);
  std::vector<at::Tensor> one{at::zeros({2})};
  CHECK(only_tensor(one, "allreduce").numel() == 2);
}

TEST_CASE("reduce ops map one to one; PREMUL_SUM is refused") {
  CHECK(reduce_op_of(c10d::ReduceOp(c10d::ReduceOp::SUM), "x") == ddp::comm::ReduceOp::kSum);
  CHECK(reduce_op_of(c10d::ReduceOp(c10d::ReduceOp::AVG), "x") == ddp::comm::ReduceOp::kAvg);
  CHECK(reduce_op_of(c10d::ReduceOp(c10d::ReduceOp::BXOR), "x") == ddp::comm::ReduceOp::kBxor);
  c10d::ReduceOp premul;
  premul.op_ = c10d::ReduceOp::PREMUL_SUM;
  CHECK_THROWS_WITH_AS(reduce_op_of(premul, "allreduce"), doctest::Contains("PREMUL_SUM"),
                       ddp::InvalidArgument);
}

TEST_CASE("roots and timeouts") {
  CHECK(root_of(1, 0, 2, "broadcast") == 1);
  CHECK_THROWS_AS(root_of(2, 0, 2, "broadcast"), ddp::InvalidArgument);
  CHECK_THROWS_AS(root_of(0, 1, 2, "broadcast"), ddp::InvalidArgument);
  CHECK(timeout_of(std::chrono::milliseconds(-1)) == ddp::kUseDefault);
  CHECK(timeout_of(std::chrono::milliseconds(250)) == ddp::Millis(250));
}

TEST_CASE("lists must hold world_size tensors like the input") {
  at::Tensor like = at::zeros({2, 3});
  std::vector<at::Tensor> ok{at::zeros({6}), at::zeros({3, 2})};
  check_list(ok, like, 2, "allgather");
  CHECK_THROWS_WITH_AS(check_list(ok, like, 3, "allgather"), doctest::Contains("holds 2 tensors"),
                       ddp::InvalidArgument);
  std::vector<at::Tensor> wrong_dtype{at::zeros({6}), at::zeros({6}, at::kDouble)};
  CHECK_THROWS_WITH_AS(check_list(wrong_dtype, like, 2, "allgather"), doctest::Contains("tensor 1"),
                       ddp::InvalidArgument);
}

TEST_CASE("flatten and unflatten round-trip, into tensors of any strides") {
  std::vector<at::Tensor> in{at::arange(4, at::kFloat).reshape({2, 2}),
                             at::arange(4, 8, at::kFloat).reshape({2, 2})};
  at::Tensor flat = flatten_list(in);
  CHECK(at::equal(flat, at::arange(8, at::kFloat)));
  at::Tensor wide = at::zeros({2, 4});
  std::vector<at::Tensor> out{at::zeros({2, 2}), wide.narrow(1, 0, 2)};  // the second is not contiguous
  unflatten_into(flat, out);
  CHECK(at::equal(out[0], in[0]));
  CHECK(at::equal(wide.narrow(1, 0, 2), in[1]));
  CHECK(flat_for(in[0], 3).numel() == 12);
}

TEST_CASE("views refuse what our collectives cannot take") {
  at::Tensor t = at::zeros({3, 4});
  CHECK_THROWS_WITH_AS(view_of(t.t(), "allreduce"), doctest::Contains("not contiguous"),
                       ddp::InvalidArgument);
  CHECK_THROWS_WITH_AS(view_of(at::zeros({2}, at::kShort), "allreduce"), doctest::Contains("dtype"),
                       ddp::InvalidArgument);
  CHECK(empty_like_view(t, "gather").count == 0);
}
