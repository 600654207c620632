#include "ddp/torch/distributed_data_parallel.h"

#include <doctest/doctest.h>
#include <torch/torch.h>

#include "common/error.h"
#include "ddp/join.h"
#include "ddp/rank_threads.h"
#include "torch_models.h"

using namespace ddp;
using ddp::testing::run_ranks;
using torch_test::Batches;
using torch_test::seeded_net;
using torch_test::shard;
using torch_test::TinyNet;

namespace {

constexpr int kSteps = 4;
constexpr int64_t kPerRank = 5;
constexpr double kLr = 0.1;
// fp16 compression's error bound on the weights after kSteps; the negative control's gap must be
// well above it, so that this check, too, catches a wrong gradient scale.
constexpr double kHalfTolerance = 1e-3;

struct Case {
  EngineOptions options;
  bool accumulate = false;  // two micro-batches per step, the first under no_sync()
  bool unused = false;      // a registered layer forward never calls
  CommHook hook;            // unset: the default (average)
};

::torch::Tensor loss_of(TinyNet& net, const ::torch::Tensor& x, const ::torch::Tensor& y) {
  return ::torch::nn::functional::cross_entropy(net(x), y);
}

// One process, whole batches: what DDP over W ranks must reproduce.
std::vector<::torch::Tensor> reference(const Case& c, const Batches& data) {
  auto net = seeded_net(42, 16, c.unused);
  ::torch::optim::SGD opt(net->parameters(), kLr);
  const int micro = c.accumulate ? 2 : 1;
  for (int s = 0; s < kSteps; ++s) {
    opt.zero_grad();
    for (int m = 0; m < micro; ++m) loss_of(net, data.x[s * micro + m], data.y[s * micro + m]).backward();
    opt.step();
  }
  return torch_test::snapshot(*net);
}

std::vector<std::vector<::torch::Tensor>> train(const Case& c, const Batches& data, int world) {
  std::vector<std::vector<::torch::Tensor>> out(world);
  run_ranks(world, [&](int rank, comm::ProcessGroupPtr group) {
    // Only rank 0 starts from the reference weights: the broadcast must bring the others there.
    auto net = seeded_net(rank == 0 ? 42 : 1000 + rank, 16, c.unused);
    ddp::torch::DistributedDataParallel model(net, group, c.options);
    if (c.hook) model->register_comm_hook(c.hook);
    ::torch::optim::SGD opt(model->parameters(), kLr);
    const int micro = c.accumulate ? 2 : 1;
    for (int s = 0; s < kSteps; ++s) {
      opt.zero_grad();
      for (int m = 0; m < micro; ++m) {
        const auto& x = data.x[s * micro + m];
        const auto& y = data.y[s * micro + m];
        auto step = [&] {
          ::torch::nn::functional::cross_entropy(model(shard(x, rank, kPerRank)), shard(y, rank, kPerRank))
              .backward();
        };
        if (m + 1 < micro) {
          auto scope = model->no_sync();
          step();
        } else {
          step();
        }
      }
      opt.step();
    }
    out[rank] = torch_test::snapshot(*net);
  });
  return out;
}

void check_equivalent(const Case& c, int world) {
  at::set_num_threads(1);
  const int micro = c.accumulate ? 2 : 1;
  Batches data = torch_test::make_batches(kSteps * micro, world * kPerRank);
  auto want = reference(c, data);
  auto got = train(c, data, world);
  for (int r = 0; r < world; ++r) {
    CAPTURE(r);
    CHECK(torch_test::max_diff(got[r], want) < 1e-5);
  }
}

}  // namespace

TEST_CASE("W ranks x batch B train the same model as one process on batch W*B") {
  Case c;
  SUBCASE("gradient copies, 2 ranks") { check_equivalent(c, 2); }
  SUBCASE("gradient copies, 3 ranks, small buckets") {
    c.options.first_bucket_cap_mb = c.options.bucket_cap_mb = 0.0005;  // one parameter per bucket
    check_equivalent(c, 3);
  }
  SUBCASE("bucket views") {
    c.options.gradient_as_bucket_view = true;
    check_equivalent(c, 2);
  }
  SUBCASE("no_sync accumulation") {
    c.accumulate = true;
    check_equivalent(c, 2);
  }
  SUBCASE("no_sync accumulation with bucket views") {
    c.accumulate = true;
    c.options.gradient_as_bucket_view = true;
    check_equivalent(c, 2);
  }
  SUBCASE("an unused branch with find_unused_parameters") {
    c.unused = true;
    c.options.find_unused_parameters = true;
    check_equivalent(c, 2);
  }
  SUBCASE("static_graph with an unused branch") {
    c.unused = true;
    c.options.static_graph = true;
    check_equivalent(c, 2);
  }
  SUBCASE("fp16 compression stays within half precision") {
    c.hook = fp16_compress_hook();
    at::set_num_threads(1);
    Batches data = torch_test::make_batches(kSteps, 2 * kPerRank);
    auto got = train(c, data, 2);
    const double diff = torch_test::max_diff(got[0], reference(c, data));
    CAPTURE(diff);
    CHECK(diff < kHalfTolerance);
    CHECK(diff > 0.0);  // the hook did compress
    CHECK(torch_test::max_diff(got[0], got[1]) == 0.0);
  }
}

TEST_CASE("negative control: a wrong gradient scale is caught by the equivalence check") {
  at::set_num_threads(1);
  Case c;
  c.hook = [](comm::ProcessGroup& group, GradBucket& bucket) {
    return group.all_reduce(bucket.buffer);
  };  // sum, not mean
  Batches data = torch_test::make_batches(kSteps, 2 * kPerRank);
  auto got = train(c, data, 2);
  const double gap = torch_test::max_diff(got[0], reference(c, data));
  CAPTURE(gap);
  CHECK(gap > 5 * kHalfTolerance);  // caught by every equivalence check here, fp16's included
}

TEST_CASE("without find_unused_parameters an unused layer is an error naming it, from backward()") {
  at::set_num_threads(1);
  std::vector<std::string> errors(2);
  run_ranks(2, [&](int rank, comm::ProcessGroupPtr group) {
    auto net = seeded_net(1, 16, /*with_unused=*/true);
    ddp::torch::DistributedDataParallel model(net, group);
    try {
      model(::torch::ones({2, torch_test::kIn})).sum().backward();
    } catch (const std::exception& e) {
      errors[rank] = e.what();
    }
  });
  for (const auto& e : errors) CHECK(e.find("unused.weight") != std::string::npos);
}

TEST_CASE("bucket-view gradients alias the engine's buckets and survive zero_grad()") {
  at::set_num_threads(1);
  run_ranks(2, [](int, comm::ProcessGroupPtr group) {
    auto net = seeded_net(3);
    EngineOptions options;
    options.gradient_as_bucket_view = true;
    ddp::torch::DistributedDataParallel model(net, group, options);
    ::torch::optim::SGD opt(model->parameters(), kLr);
    for (int step = 0; step < 3; ++step) {  // across the rebuild after the first iteration
      opt.zero_grad();
      model(::torch::ones({2, torch_test::kIn})).sum().backward();
      opt.step();
      auto& engine = model->engine();
      size_t i = 0;
      for (const auto& p : net->parameters()) {
        REQUIRE(p.grad().defined());
        CHECK(p.grad().data_ptr() == engine.grad(i++).data);
      }
    }
  });
}

// One process, what join over 3 ranks with 2, 4 and 6 batches must reproduce: at step s the ranks
// still training (s < 2 + 2r) contribute their shard's gradient, and the sum is divided by the
// initial world size (c10d's default), or by the ranks that contributed.
std::vector<::torch::Tensor> join_reference(const Batches& data, bool by_initial_world = true) {
  auto net = seeded_net(5);
  ::torch::optim::SGD opt(net->parameters(), kLr);
  for (int s = 0; s < 6; ++s) {
    opt.zero_grad();
    ::torch::Tensor loss = ::torch::zeros({});
    int active = 0;
    for (int r = 0; r < 3; ++r) {
      if (s >= 2 + 2 * r) continue;
      loss = loss + loss_of(net, shard(data.x[s], r, kPerRank), shard(data.y[s], r, kPerRank));
      ++active;
    }
    (loss / (by_initial_world ? 3 : active)).backward();
    opt.step();
  }
  return torch_test::snapshot(*net);
}

TEST_CASE("join: uneven inputs finish without a hang and every rank ends with the model of c10d's Join") {
  at::set_num_threads(1);
  std::vector<std::vector<::torch::Tensor>> out(3);
  Batches data = torch_test::make_batches(6, 3 * kPerRank);
  run_ranks(3, [&](int rank, comm::ProcessGroupPtr group) {
    auto net = seeded_net(5);
    ddp::torch::DistributedDataParallel model(net, group);
    ::torch::optim::SGD opt(model->parameters(), kLr);
    {
      ddp::Join join(model->engine());
      for (int s = 0; s < 2 + 2 * rank; ++s) {  // 2, 4 and 6 batches
        opt.zero_grad();
        auto x = shard(data.x[s], rank, kPerRank);
        ::torch::nn::functional::cross_entropy(model(x), shard(data.y[s], rank, kPerRank)).backward();
        opt.step();
      }
      join.join();
    }
    out[rank] = torch_test::snapshot(*net);
  });
  CHECK(torch_test::max_diff(out[0], out[2]) == 0.0);
  CHECK(torch_test::max_diff(out[1], out[2]) == 0.0);
  const auto want = join_reference(data);
  CHECK(torch_test::max_diff(out[2], want) < 1e-5);
  // Its negative control: averaging over the ranks still training instead is far outside it.
  const double gap = torch_test::max_diff(join_reference(data, false), want);
  CAPTURE(gap);
  CHECK(gap > 1e-3);
}

TEST_CASE("the wrapped module is submodule 'module', as in PyTorch") {
  at::set_num_threads(1);
  run_ranks(1, [](int, comm::ProcessGroupPtr group) {
    auto net = seeded_net(1);
    ddp::torch::DistributedDataParallel model(net, group);
    auto names = model->named_parameters().keys();
    CHECK(names.front() == "module.fc1.weight");
    CHECK(model->module().get() == net.get());
  });
}
