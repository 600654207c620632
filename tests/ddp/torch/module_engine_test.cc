#include "ddp/torch/module_engine.h"

#include <doctest/doctest.h>
#include <torch/torch.h>

#include "common/error.h"
#include "ddp/rank_threads.h"
#include "torch_models.h"

using namespace ddp;
using ddp::testing::run_ranks;
using torch_test::seeded_net;

namespace {

// Every rank's error message (empty when it did not throw).
std::vector<std::string> errors_of(int world, const std::function<void(int, comm::ProcessGroupPtr)>& fn) {
  std::vector<std::string> errors(world);
  run_ranks(world, [&](int rank, comm::ProcessGroupPtr group) {
    try {
      fn(rank, group);
    } catch (const InvalidArgument& e) {
      errors[rank] = e.what();
    }
  });
  return errors;
}

}  // namespace

TEST_CASE("construction broadcasts rank 0's parameters, frozen parameters and buffers") {
  at::set_num_threads(1);
  std::vector<std::vector<::torch::Tensor>> state(2);
  run_ranks(2, [&](int rank, comm::ProcessGroupPtr group) {
    auto net = seeded_net(100 + rank);
    net->fc1->bias.set_requires_grad(false);  // frozen: broadcast once, never reduced
    auto stat = net->register_buffer("stat", ::torch::full({3}, static_cast<float>(rank + 1)));
    ddp::torch::ModuleEngine engine(net.ptr(), group);
    state[rank] = torch_test::snapshot(*net);
    state[rank].push_back(stat.clone());
    CHECK(engine.engine().num_params() == 3);  // fc1.weight, fc2.weight, fc2.bias
  });
  CHECK(torch_test::max_diff(state[0], state[1]) == 0.0);
  CHECK(state[1].back()[0].item<float>() == 1.0f);
}

TEST_CASE("buffers follow rank 0 at every forward") {
  at::set_num_threads(1);
  std::vector<float> after(2);
  run_ranks(2, [&](int rank, comm::ProcessGroupPtr group) {
    auto net = seeded_net(1);
    auto stat = net->register_buffer("stat", ::torch::zeros({1}));
    ddp::torch::ModuleEngine engine(net.ptr(), group);
    stat.fill_(static_cast<float>(10 + rank));  // diverges, as running statistics do
    ::torch::NoGradGuard no_grad;
    engine.pre_forward();
    after[rank] = stat.item<float>();
  });
  CHECK(after == std::vector<float>{10.0f, 10.0f});
}

TEST_CASE("a model that differs across ranks is an error naming the parameter on every rank") {
  at::set_num_threads(1);
  auto errors = errors_of(2, [](int rank, comm::ProcessGroupPtr group) {
    auto net = seeded_net(1, rank == 0 ? 16 : 17);
    ddp::torch::ModuleEngine engine(net.ptr(), group);
  });
  for (const auto& e : errors) CHECK(e.find("fc1.weight") != std::string::npos);
}

TEST_CASE("requires_grad changed after construction is an error naming the parameter and rank") {
  at::set_num_threads(1);
  auto errors = errors_of(1, [](int, comm::ProcessGroupPtr group) {
    auto net = seeded_net(1);
    ddp::torch::ModuleEngine engine(net.ptr(), group);
    net->fc2->weight.set_requires_grad(false);
    engine.pre_forward();
  });
  CHECK(errors[0].find("'fc2.weight' (rank 0) no longer requires grad") != std::string::npos);
}

TEST_CASE("a second training forward before backward is an error unless find_unused_parameters") {
  at::set_num_threads(1);
  auto errors = errors_of(1, [](int, comm::ProcessGroupPtr group) {
    auto net = seeded_net(1);
    ddp::torch::ModuleEngine engine(net.ptr(), group);
    engine.pre_forward();
    net->forward(::torch::ones({2, torch_test::kIn}));
    {
      ::torch::NoGradGuard no_grad;  // evaluation does not count
      engine.pre_forward();
    }
    engine.pre_forward();
  });
  CHECK(errors[0].find("has not been followed by backward()") != std::string::npos);

  run_ranks(1, [](int, comm::ProcessGroupPtr group) {
    auto net = seeded_net(1);
    EngineOptions options;
    options.find_unused_parameters = true;
    ddp::torch::ModuleEngine engine(net.ptr(), group, options);
    engine.pre_forward();
    engine.pre_forward();  // allowed: the user said parameters may go unused
  });
}

TEST_CASE("an input on another device than the parameters is an error naming its position") {
  at::set_num_threads(1);
  run_ranks(1, [](int, comm::ProcessGroupPtr group) {
    auto net = seeded_net(1);
    ddp::torch::ModuleEngine engine(net.ptr(), group);
    engine.check_input(::torch::ones({1}), 0);
    auto meta = ::torch::empty({1}, ::torch::TensorOptions().device(at::kMeta));
    CHECK_THROWS_WITH_AS(engine.check_input(meta, 1), doctest::Contains("argument 1 is on meta"),
                         InvalidArgument);
  });
}

TEST_CASE("parameters on two devices are refused by name") {
  at::set_num_threads(1);
  auto errors = errors_of(1, [](int, comm::ProcessGroupPtr group) {
    auto net = seeded_net(1);
    net->fc2->register_parameter("elsewhere",
                                 ::torch::empty({2}, ::torch::TensorOptions().device(at::kMeta)));
    ddp::torch::ModuleEngine engine(net.ptr(), group);
  });
  CHECK(errors[0].find("'fc2.elsewhere' (rank 0) is on meta") != std::string::npos);
}

TEST_CASE("state loaded into the wrapped model after construction is an error, not a crash") {
  at::set_num_threads(1);
  auto errors = errors_of(1, [](int, comm::ProcessGroupPtr group) {
    auto net = seeded_net(1);
    ddp::torch::ModuleEngine engine(net.ptr(), group);
    ::torch::NoGradGuard no_grad;
    net->fc1->weight.set_(::torch::zeros_like(net->fc1->weight));  // what torch::load does
    engine.pre_forward();
  });
  CHECK(errors[0].find("'fc1.weight' (rank 0) no longer lives where") != std::string::npos);
}

TEST_CASE("frozen parameters that differ across ranks are an error naming them, not a broken broadcast") {
  at::set_num_threads(1);
  auto errors = errors_of(2, [](int rank, comm::ProcessGroupPtr group) {
    auto net = seeded_net(1);
    net->register_parameter("frozen", ::torch::zeros({rank == 0 ? 3 : 4}), /*requires_grad=*/false);
    ddp::torch::ModuleEngine engine(net.ptr(), group);
  });
  for (const auto& e : errors) CHECK(e.find("frozen parameter 'frozen'") != std::string::npos);
}
