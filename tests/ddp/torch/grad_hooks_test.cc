#include "ddp/torch/grad_hooks.h"

#include <doctest/doctest.h>
#include <torch/torch.h>

#include "common/error.h"

using namespace ddp;

TEST_CASE("the hook runs after accumulation, once per backward, and not after destruction") {
  auto w = ::torch::ones({3}, ::torch::requires_grad());
  w.mutable_grad() = ::torch::full({3}, 10.0f);
  std::vector<float> seen;
  {
    ddp::torch::GradHooks hooks({w}, {"w"}, [&](size_t i) {
      CHECK(i == 0);
      seen.push_back(w.grad()[0].item<float>());  // .grad already holds old + new
    });
    (w * 2).sum().backward();
    CHECK(seen == std::vector<float>{12.0f});
    (w * w).sum().backward();  // grad of w*w is 2w = 2
    CHECK(seen == std::vector<float>{12.0f, 14.0f});
  }
  (w * 2).sum().backward();
  CHECK(seen.size() == 2);
}

TEST_CASE("a queued callback runs when the backward pass has finished") {
  auto a = ::torch::ones({2}, ::torch::requires_grad());
  auto b = ::torch::ones({2}, ::torch::requires_grad());
  std::vector<std::string> order;
  ddp::torch::GradHooks hooks({a, b}, {"a", "b"}, [&](size_t i) {
    order.push_back(i == 0 ? "a" : "b");
    if (order.size() == 1) ddp::torch::queue_after_backward([&] { order.push_back("end"); });
  });
  (a * b).sum().backward();
  REQUIRE(order.size() == 3);
  CHECK(order.back() == "end");
}

TEST_CASE("non-leaf tensors and tensors without requires_grad are refused by name") {
  auto leaf = ::torch::ones({2});
  CHECK_THROWS_WITH(ddp::torch::GradHooks({leaf}, {"frozen"}, [](size_t) {}), doctest::Contains("'frozen'"));
  auto w = ::torch::ones({2}, ::torch::requires_grad());
  CHECK_THROWS_AS(ddp::torch::GradHooks({w * 2}, {"view"}, [](size_t) {}), InvalidArgument);
}
