#include "ddp/torch/zero_optimizer.h"

#include <doctest/doctest.h>
#include <torch/torch.h>

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

TEST_CASE("ZeRO: a consolidated state loads back into every rank's shard") {
  at::set_num_threads(1);
  run_ranks(kWorld, [](int rank, ddp::comm::ProcessGroupPtr group) {
    auto net = seeded_mlp(2);
    ddp::torch::ZeroRedundancyOptimizer zero(net->parameters(), group, adam());
    for (auto& p : net->parameters()) p.mutable_grad() = at::ones_like(p);
    zero.step();
    const size_t bytes = ddp::torch::optimizer_state_bytes(zero.local_optimizer());
    // Rank 0 saves the full state as a checkpoint, loads it into an unsharded Adam, and takes
    // its own shard back from it.
    zero.consolidate_state_dict(0);
    if (rank == 0) {
      std::ostringstream out;
      ::torch::save(*zero.consolidated(), out);
      auto full = adam()(net->parameters());
      std::istringstream in(out.str());
      ::torch::load(*full, in);
      zero.local_optimizer().state().clear();
      zero.load_consolidated(*full);
      CHECK(ddp::torch::optimizer_state_bytes(zero.local_optimizer()) == bytes);
      CHECK(ddp::torch::optimizer_state_bytes(*full) > bytes);
    }
  });
}
