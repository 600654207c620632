#include "ddp/torch/tensor_buffer.h"

#include <doctest/doctest.h>
#include <torch/torch.h>

#include "common/error.h"

using namespace ddp;

TEST_CASE("every supported dtype maps both ways") {
  for (auto t :
       {at::kFloat, at::kDouble, at::kHalf, at::kBFloat16, at::kChar, at::kByte, at::kInt, at::kLong}) {
    CHECK(static_cast<int>(ddp::torch::scalar_type_of(ddp::torch::dtype_of(t, "x"))) == static_cast<int>(t));
  }
  CHECK_THROWS_AS(ddp::torch::dtype_of(at::kBool, "flag"), InvalidArgument);
  CHECK_THROWS_WITH(ddp::torch::dtype_of(at::kComplexFloat, "weights"), doctest::Contains("weights: dtype"));
}

TEST_CASE("a buffer views the tensor's memory and a tensor views the buffer's") {
  auto t = ::torch::arange(6, ::torch::kFloat32).reshape({2, 3});
  comm::Buffer b = ddp::torch::buffer_of(t, "t");
  CHECK(b.data == t.data_ptr());
  CHECK(b.count == 6);
  CHECK(b.dtype == comm::DType::kFloat32);
  CHECK_FALSE(b.device.is_cuda());
  auto back = ddp::torch::tensor_of(b, {3, 2});
  back.fill_(5);
  CHECK(t.sum().item<float>() == 30.0f);  // wrote through: no copy either way
}

TEST_CASE("non-contiguous and undefined tensors are refused with their name") {
  auto t = ::torch::zeros({4, 4}).t();
  CHECK_THROWS_WITH(ddp::torch::buffer_of(t, "fc.weight"),
                    doctest::Contains("fc.weight: tensor is not contiguous"));
  CHECK_THROWS_AS(ddp::torch::buffer_of(at::Tensor(), "g"), InvalidArgument);
  CHECK_THROWS_WITH(ddp::torch::device_of(at::Device("meta"), "x"), doctest::Contains("not supported"));
}
