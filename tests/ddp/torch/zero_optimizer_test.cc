#include "ddp/torch/zero_optimizer.h"

#include <doctest/doctest.h>
#include <torch/torch.h>

#include <functional>
#include <mutex>
#include <sstream>
#include <string>
#include <vector>

#include "common/error.h"
#include "ddp/rank_threads.h"
#include "ddp/torch/distributed_data_parallel.h"
#include "torch_models.h"

using ddp::testing::run_ranks;
using torch_test::shard;
namespace nn = ::torch::nn;
namespace optim = ::torch::optim;

namespace {

constexpr int kWorld = 2;
constexpr int kSteps = 4;
constexpr int64_t kPerRank = 4;

// Five Linear layers (three 32x32): ten parameters of uneven sizes to partition.
nn::Sequential seeded_mlp(uint64_t seed) {
  static std::mutex mu;
  std::lock_guard<std::mutex> lock(mu);
  ::torch::manual_seed(seed);
  return nn::Sequential(nn::Linear(torch_test::kIn, 32), nn::Functional(::torch::relu), nn::Linear(32, 32),
                        nn::Functional(::torch::relu), nn::Linear(32, 32), nn::Functional(::torch::relu),
                        nn::Linear(32, 32), nn::Functional(::torch::relu),
                        nn::Linear(32, torch_test::kClasses));
}

using Factory = ddp::torch::ZeroRedundancyOptimizer::Factory;

Factory sgd() {
  return [](std::vector<at::Tensor> p) {
    return std::make_unique<optim::SGD>(std::move(p), optim::SGDOptions(0.1).momentum(0.9));
  };
}
Factory adam() {
  return [](std::vector<at::Tensor> p) {
    return std::make_unique<optim::Adam>(std::move(p), optim::AdamOptions(0.01));
  };
}

double max_diff(const std::vector<at::Tensor>& a, const std::vector<at::Tensor>& b) {
  return torch_test::max_diff(a, b);
}

struct Outcome {
  std::vector<at::Tensor> plain, zero;  // parameters after kSteps
  size_t plain_bytes = 0, zero_bytes = 0, largest_param_state = 0;
  std::vector<at::Tensor> plain_state, consolidated_state;  // rank 0's
};

std::vector<at::Tensor> state_tensors(const optim::Optimizer& opt, const std::vector<at::Tensor>& params) {
  std::vector<at::Tensor> out;
  for (const auto& p : params) {
    auto it = opt.state().find(c10::guts::to_string(p.unsafeGetTensorImpl()));
    if (it == opt.state().end()) continue;
    if (const auto* s = dynamic_cast<const optim::SGDParamState*>(it->second.get()))
      out.push_back(s->momentum_buffer());
    if (const auto* s = dynamic_cast<const optim::AdamParamState*>(it->second.get())) {
      out.push_back(s->exp_avg());
      out.push_back(s->exp_avg_sq());
    }
  }
  return out;
}

// The same model and data under DDP, once with the unsharded optimizer and once with ZeRO.
std::vector<Outcome> train(const Factory& factory) {
  at::set_num_threads(1);
  auto data = torch_test::make_batches(kSteps, kWorld * kPerRank);
  std::vector<Outcome> out(kWorld);
  run_ranks(kWorld, [&](int rank, ddp::comm::ProcessGroupPtr group) {
    auto& o = out[rank];
    auto run = [&](auto& model, auto&& step, auto&& zero_grad) {
      for (int s = 0; s < kSteps; ++s) {
        zero_grad();
        auto x = shard(data.x[s], rank, kPerRank);
        nn::functional::cross_entropy(model(x), shard(data.y[s], rank, kPerRank)).backward();
        step();
      }
    };
    auto net_a = seeded_mlp(1);
    ddp::torch::DistributedDataParallel model_a(net_a, group);
    auto plain = factory(net_a->parameters());
    run(
        model_a, [&] { plain->step(); }, [&] { plain->zero_grad(); });
    o.plain = torch_test::snapshot(*net_a);
    o.plain_bytes = ddp::torch::optimizer_state_bytes(*plain);

    auto net_b = seeded_mlp(1);
    ddp::torch::DistributedDataParallel model_b(net_b, group);
    ddp::torch::ZeroRedundancyOptimizer zero(net_b->parameters(), group, factory);
    run(
        model_b, [&] { zero.step(); }, [&] { zero.zero_grad(); });
    o.zero = torch_test::snapshot(*net_b);
    o.zero_bytes = ddp::torch::optimizer_state_bytes(zero.local_optimizer());
    int64_t elements = 0, largest = 0;
    for (const auto& p : net_a->parameters()) {
      elements += p.numel();
      largest = std::max(largest, p.numel());
    }
    o.largest_param_state = o.plain_bytes / static_cast<size_t>(elements) * static_cast<size_t>(largest);
    zero.consolidate_state_dict(0);
    CHECK((zero.consolidated() != nullptr) == (rank == 0));
    if (rank == 0) {
      o.plain_state = state_tensors(*plain, net_a->parameters());
      o.consolidated_state = state_tensors(*zero.consolidated(), net_b->parameters());
    }
  });
  return out;
}

void check(const std::vector<Outcome>& out, const char* name) {
  size_t total = 0;
  for (int r = 0; r < kWorld; ++r) {
    CAPTURE(r);
    CHECK(max_diff(out[r].zero, out[r].plain) < 1e-6);
    CHECK(max_diff(out[r].zero, out[0].zero) == 0.0);
    CHECK(out[r].plain_bytes == out[0].plain_bytes);
    // Greedy partition: no rank holds more than its share plus the largest parameter's state.
    CHECK(out[r].zero_bytes <= out[r].plain_bytes / kWorld + out[r].largest_param_state);
    CHECK(out[r].zero_bytes < out[r].plain_bytes);
    total += out[r].zero_bytes;
    MESSAGE(std::string(name), " rank ", r, ": optimizer state ", out[r].zero_bytes, " bytes with ZeRO, ",
            out[r].plain_bytes, " unsharded (",
            100.0 * static_cast<double>(out[r].zero_bytes) / static_cast<double>(out[r].plain_bytes), "%)");
  }
  CHECK(total == out[0].plain_bytes);
  REQUIRE(out[0].consolidated_state.size() == out[0].plain_state.size());
  CHECK(!out[0].plain_state.empty());
  CHECK(max_diff(out[0].consolidated_state, out[0].plain_state) < 1e-6);
}

}  // namespace

TEST_CASE(
    "ZeRO with SGD (momentum) gives the unsharded optimizer's parameters and state on 1/world the memory") {
  check(train(sgd()), "SGD");
}

TEST_CASE("ZeRO with Adam gives the unsharded optimizer's parameters and state on 1/world the memory") {
  check(train(adam()), "Adam");
}

TEST_CASE("ZeRO partitions greedily by size, largest first, as PyTorch's") {
  run_ranks(kWorld, [](int rank, ddp::comm::ProcessGroupPtr group) {
    std::vector<at::Tensor> params{at::zeros({10}), at::zeros({100}), at::zeros({60}), at::zeros({50})};
    ddp::torch::ZeroRedundancyOptimizer zero(params, group, sgd());
    // 100 -> rank 0; 60 -> rank 1; 50 -> rank 1 (60 < 100); 10 -> rank 0 (100 < 110).
    CHECK(zero.owner(0) == 0);
    CHECK(zero.owner(1) == 0);
    CHECK(zero.owner(2) == 1);
    CHECK(zero.owner(3) == 1);
    CHECK(zero.shard().size() == 2);
    CHECK_THROWS_AS(zero.consolidate_state_dict(kWorld), ddp::InvalidArgument);
    (void)rank;
  });
}

namespace {

// Phase 1 at world 2 (2 steps), a checkpoint (the model, and the optimizer's state saved from
// rank 0: ZeRO's consolidated, or the unsharded one), phase 2 at world 3 (2 steps) from it.
struct Checkpoint {
  std::vector<at::Tensor> params;
  std::string optimizer;
};

void steps(nn::Sequential& net, ddp::torch::DistributedDataParallel<nn::Sequential>& model,
           const std::function<void()>& step, const torch_test::Batches& data, int rank) {
  for (size_t s = 0; s < data.x.size(); ++s) {
    for (auto& p : net->parameters()) p.mutable_grad() = at::Tensor();
    nn::functional::cross_entropy(model(shard(data.x[s], rank, kPerRank)), shard(data.y[s], rank, kPerRank))
        .backward();
    step();
  }
}

void load_params(nn::Sequential& net, const std::vector<at::Tensor>& params) {
  ::torch::NoGradGuard no_grad;
  auto mine = net->parameters();
  for (size_t i = 0; i < mine.size(); ++i) mine[i].copy_(params[i]);
}

bool equal(const std::vector<at::Tensor>& a, const std::vector<at::Tensor>& b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i)
    if (!a[i].equal(b[i])) return false;
  return true;
}

}  // namespace

TEST_CASE("ZeRO: the consolidated state is every shard's by value, and resumes at another world size") {
  at::set_num_threads(1);
  constexpr int kResumeWorld = 3;
  const auto first = torch_test::make_batches(2, kWorld * kPerRank, 21);
  const auto second = torch_test::make_batches(2, kResumeWorld * kPerRank, 22);
  Checkpoint zero_ckpt, plain_ckpt;
  std::vector<std::vector<at::Tensor>> shards(kWorld);
  run_ranks(kWorld, [&](int rank, ddp::comm::ProcessGroupPtr group) {
    auto net = seeded_mlp(2);
    ddp::torch::DistributedDataParallel model(net, group);
    ddp::torch::ZeroRedundancyOptimizer zero(net->parameters(), group, adam());
    steps(
        net, model, [&] { zero.step(); }, first, rank);
    zero.consolidate_state_dict(0);
    // Each rank's shard, by value, against rank 0's consolidated state: after the gather, so
    // no rank steps again before rank 0 reads it.
    shards[static_cast<size_t>(rank)] = state_tensors(zero.local_optimizer(), zero.shard());
    group->barrier()->wait();
    if (rank == 0) {
      const auto all = net->parameters();
      for (int r = 0; r < kWorld; ++r) {
        CAPTURE(r);
        std::vector<at::Tensor> owned;
        for (size_t i = 0; i < all.size(); ++i)
          if (zero.owner(i) == r) owned.push_back(all[i]);
        CHECK(!shards[static_cast<size_t>(r)].empty());
        CHECK(equal(state_tensors(*zero.consolidated(), owned), shards[static_cast<size_t>(r)]));
      }
      std::ostringstream out;
      ::torch::save(*zero.consolidated(), out);
      zero_ckpt = {torch_test::snapshot(*net), out.str()};
    }
    group->barrier()->wait();
    auto plain_net = seeded_mlp(2);
    ddp::torch::DistributedDataParallel plain_model(plain_net, group);
    auto plain = adam()(plain_net->parameters());
    steps(
        plain_net, plain_model, [&] { plain->step(); }, first, rank);
    if (rank == 0) {
      std::ostringstream out;
      ::torch::save(*plain, out);
      plain_ckpt = {torch_test::snapshot(*plain_net), out.str()};
    }
  });
  CHECK(max_diff(zero_ckpt.params, plain_ckpt.params) < 1e-6);

  std::vector<std::vector<at::Tensor>> resumed(kResumeWorld), unsharded(kResumeWorld), forgot(kResumeWorld);
  run_ranks(kResumeWorld, [&](int rank, ddp::comm::ProcessGroupPtr group) {
    auto resume = [&](const Checkpoint& ckpt, bool sharded, bool load_state) {
      auto net = seeded_mlp(3);
      load_params(net, ckpt.params);
      ddp::torch::DistributedDataParallel model(net, group);
      auto full = adam()(net->parameters());
      std::istringstream in(ckpt.optimizer);
      ::torch::load(*full, in);
      if (!sharded) {
        steps(
            net, model, [&] { full->step(); }, second, rank);
        return torch_test::snapshot(*net);
      }
      ddp::torch::ZeroRedundancyOptimizer zero(net->parameters(), group, adam());
      if (load_state) {
        zero.load_consolidated(*full);
        CHECK(equal(state_tensors(zero.local_optimizer(), zero.shard()), state_tensors(*full, zero.shard())));
      }
      steps(
          net, model, [&] { zero.step(); }, second, rank);
      return torch_test::snapshot(*net);
    };
    resumed[rank] = resume(zero_ckpt, true, true);
    unsharded[rank] = resume(plain_ckpt, false, true);
    forgot[rank] = resume(zero_ckpt, true, false);
  });
  for (int r = 0; r < kResumeWorld; ++r) {
    CAPTURE(r);
    CHECK(max_diff(resumed[r], unsharded[r]) < 1e-6);
    CHECK(max_diff(forgot[r], unsharded[r]) > 1e-4);  // Adam's moments and step count mattered
  }
}
