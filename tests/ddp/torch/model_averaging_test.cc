// Local SGD (ddp/post_local_sgd_hook.h + ddp/torch/model_averaging.h) against PyTorch 1.13's
// post_localSGD_hook + PeriodicModelAverager + PostLocalSGDOptimizer, run by
// companions_reference.py on the same model and data.
#include "ddp/torch/model_averaging.h"

#include <doctest/doctest.h>
#include <torch/torch.h>

#include <memory>
#include <vector>

#include "common/error.h"
#include "ddp/post_local_sgd_hook.h"
#include "ddp/rank_threads.h"
#include "ddp/torch/distributed_data_parallel.h"
#include "torch_reference.h"

using ddp::testing::run_ranks;
using torch_test::shard;

namespace {

constexpr int kWorld = 2;
constexpr int64_t kPerRank = 8;
constexpr int64_t kWarmup = 2, kPeriod = 3;
constexpr int kSteps = 8;  // averaged after steps 2 and 5; steps 6 and 7 stay local
constexpr double kLr = 0.1, kMomentum = 0.9;
const torch_test::Layers kLayers = {{torch_test::kIn, 32}, {32, 32}, {32, torch_test::kClasses}};

}  // namespace

TEST_CASE("average_parameters: the parameters with a gradient, averaged in place") {
  run_ranks(kWorld, [](int rank, ddp::comm::ProcessGroupPtr group) {
    auto a = ::torch::full({3}, 1.0 + rank).requires_grad_();
    auto b = ::torch::full({2}, 10.0 + rank).requires_grad_();
    a.mutable_grad() = ::torch::zeros({3});
    const void* where = a.data_ptr();
    ddp::torch::average_parameters({a, b}, *group);
    CHECK(a.data_ptr() == where);
    CHECK(::torch::allclose(a, ::torch::full({3}, 1.5)));
    CHECK(::torch::equal(b, ::torch::full({2}, 10.0 + rank)));  // no gradient: left alone
  });
  CHECK_THROWS_AS(ddp::torch::PeriodicModelAverager(0, 0, nullptr), ddp::InvalidArgument);
  CHECK_THROWS_AS(ddp::PostLocalSGDState(ddp::PostLocalSGDOptions{0, nullptr}), ddp::InvalidArgument);
}

// Averaging is exact (x / 2 + y / 2 in both) and every step runs the same LibTorch kernels as
// PyTorch's (one thread): the parameters must be equal, bit for bit.
TEST_CASE("post-local SGD takes PyTorch 1.13's PostLocalSGDOptimizer's steps" *
          doctest::skip(!torch_test::reference_available())) {
  at::set_num_threads(1);
  auto data = torch_test::make_batches(kSteps, kWorld * kPerRank);
  const auto init = torch_test::snapshot(*torch_test::seeded_layers(kLayers, 1));
  std::vector<at::Tensor> ours(kWorld);
  ddp::BucketAssignment buckets;
  run_ranks(kWorld, [&](int rank, ddp::comm::ProcessGroupPtr group) {
    auto net = torch_test::seeded_layers(kLayers, 1);
    ddp::torch::DistributedDataParallel model(net, group);
    model->register_comm_hook(ddp::post_local_sgd_hook(
        std::make_shared<ddp::PostLocalSGDState>(ddp::PostLocalSGDOptions{kWarmup, nullptr})));
    ddp::torch::PostLocalSGDOptimizer opt(
        std::make_unique<::torch::optim::SGD>(net->parameters(),
                                              ::torch::optim::SGDOptions(kLr).momentum(kMomentum)),
        ddp::torch::PeriodicModelAverager(kPeriod, kWarmup, group));
    for (int s = 0; s < kSteps; ++s) {
      opt.zero_grad();
      auto out = model(shard(data.x[s], rank, kPerRank));
      ::torch::nn::functional::cross_entropy(out, shard(data.y[s], rank, kPerRank)).backward();
      opt.step();
    }
    CHECK(opt.averager().step() == kSteps);
    ours[rank] = torch_test::flat(net->parameters());
    if (rank == 0) buckets = model->engine().buckets();
  });
  nlohmann::json config = {{"mode", "localsgd"},
                           {"world", kWorld},
                           {"steps", kSteps},
                           {"per_rank", kPerRank},
                           {"lr", kLr},
                           {"momentum", kMomentum},
                           {"buckets", buckets},
                           {"localsgd", {{"start_iter", kWarmup}, {"period", kPeriod}, {"warmup", kWarmup}}}};
  const auto theirs = torch_test::run_reference({config}, kLayers, init, data).at(0);
  REQUIRE(theirs.size() == kWorld);
  for (int r = 0; r < kWorld; ++r) {
    CAPTURE(r);
    const double diff = torch_test::max_abs_diff(ours[r], theirs[r]);
    MESSAGE("rank ", r, ": max |ours - PyTorch| = ", diff);
    CHECK(diff == 0.0);
  }
  // The last two steps were local: the ranks differ (in both systems).
  CHECK(torch_test::max_abs_diff(ours[0], ours[1]) > 1e-4);
  CHECK(torch_test::max_abs_diff(theirs[0], theirs[1]) > 1e-4);
}
