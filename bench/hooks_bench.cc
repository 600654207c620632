// ddp-bench hooks: LibTorch DDP's step time and bytes per step with each gradient comm hook
// (plain all_reduce, fp16_compress_hook, powersgd_hook at ranks 1, 2 and 4; "compute": none,
// the step's compute alone), and ZeRO's optimizer state per rank beside the unsharded one's.
// A rank program: run it under ddp-launch (across emulated hosts: bench/companions.sh).
//   ddp-launch --standalone --nproc-per-node 2 ddp-bench hooks --hooks compute,plain,fp16,powersgd1
// Model: --layers x (Linear(hidden, hidden) + ReLU), MSE loss, SGD with momentum, batch --batch
// per rank, 1 thread per rank. Per hook: a fresh model and DDP wrapper, --warmup untimed steps,
// then --steps timed ones (each the slowest rank's). Bytes per step: what one rank hands to its
// all_reduces (the payload, after compression). Rank 0 prints one JSON row per hook (a hook
// listed twice is measured twice), then one of the optimizer state one rank keeps unsharded and
// the most any rank keeps (ZeRO).
#include <torch/nn/functional/loss.h>
#include <torch/nn/modules/container/sequential.h>
#include <torch/optim/sgd.h>
#include <torch/utils.h>
#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "bench/bench.h"
#include "bench/machine_json.h"
#include "bench/torch_mlp.h"
#include "comm/init.h"
#include "ddp/powersgd.h"
#include "ddp/torch/distributed_data_parallel.h"
#include "ddp/torch/powersgd_random.h"
#include "ddp/torch/zero_optimizer.h"

namespace {

struct HooksConfig {
  int layers = 6;
  int hidden = 2048;
  int batch = 32;
  int steps = 5;
  int warmup = 3;
  std::string hooks = "compute,plain,fp16,powersgd1,powersgd2,powersgd4";
  std::string backend = "tcp";
};

// The hook named `name`, counting its payload bytes into `bytes` (PowerSGD's through `state`).
ddp::CommHook make_hook(const std::string& name, std::shared_ptr<std::atomic<double>> bytes,
                        std::shared_ptr<ddp::PowerSGDState>& state) {
  if (name.rfind("powersgd", 0) == 0) {
    ddp::PowerSGDOptions o;
    o.matrix_approximation_rank = std::stoi(name.substr(8));
    o.start_powersgd_iter = 2;
    o.random_normal = ddp::torch::torch_random_normal();
    state = std::make_shared<ddp::PowerSGDState>(o);
    return ddp::powersgd_hook(state);
  }
  if (name == "compute") {  // the gradients stay local: nothing is sent
    return [](ddp::comm::ProcessGroup&, ddp::GradBucket& b) {
      return ddp::comm::Work::completed("compute bucket " + std::to_string(b.index));
    };
  }
  double factor = 1.0;
  ddp::CommHook inner = ddp::allreduce_hook();
  if (name == "fp16") {
    factor = 0.5;
    inner = ddp::fp16_compress_hook();
  } else if (name != "plain") {
    throw std::invalid_argument("ddp-bench hooks: unknown hook '" + name +
                                "' (compute, plain, fp16, powersgd<rank>)");
  }
  return [inner, bytes, factor](ddp::comm::ProcessGroup& g, ddp::GradBucket& b) {
    *bytes = *bytes + static_cast<double>(b.buffer.bytes()) * factor;
    return inner(g, b);
  };
}

nlohmann::json measure(const HooksConfig& c, const std::string& name,
                       const ddp::comm::ProcessGroupPtr& group) {
  auto bytes = std::make_shared<std::atomic<double>>(0.0);
  std::shared_ptr<ddp::PowerSGDState> state;
  auto net = ddp::bench::make_mlp(c.layers, c.hidden, 1);
  ddp::torch::DistributedDataParallel model(net, group);
  model->register_comm_hook(make_hook(name, bytes, state));
  ::torch::optim::SGD opt(net->parameters(), ::torch::optim::SGDOptions(1e-4).momentum(0.9));
  auto x = ::torch::randn({c.batch, c.hidden}), y = ::torch::randn({c.batch, c.hidden});
  auto step = [&] {
    opt.zero_grad();
    ::torch::nn::functional::mse_loss(model(x), y).backward();
    opt.step();
  };
  for (int s = 0; s < c.warmup; ++s) step();
  *bytes = 0.0;
  const int64_t compressed_before = state ? state->numel_after_compression() : 0;
  std::vector<double> ms;
  for (int s = 0; s < c.steps; ++s) {
    group->barrier()->wait();
    const auto t0 = std::chrono::steady_clock::now();
    step();
    ms.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
  }
  ddp::comm::AllReduceOptions max;
  max.op = ddp::comm::ReduceOp::kMax;
  group->all_reduce(ddp::comm::view(ms.data(), ms.size()), max)->wait();
  double sent = *bytes;
  if (state) sent = static_cast<double>(state->numel_after_compression() - compressed_before) * sizeof(float);
  size_t params = 0;
  for (const auto& p : net->parameters()) params += static_cast<size_t>(p.numel());
  return {{"hook", name},           {"params", params},
          {"world", group->size()}, {"step_ms", ddp::bench::median(ms)},
          {"step_ms_per_step", ms}, {"bytes_per_step", sent / c.steps}};
}

// The momentum buffers one rank keeps: unsharded, and under ZeRO (the most over ranks).
nlohmann::json zero_memory(const HooksConfig& c, const ddp::comm::ProcessGroupPtr& group) {
  auto net = ddp::bench::make_mlp(c.layers, c.hidden, 1);
  ddp::torch::DistributedDataParallel model(net, group);
  auto x = ::torch::randn({c.batch, c.hidden}), y = ::torch::randn({c.batch, c.hidden});
  ::torch::optim::SGD plain(net->parameters(), ::torch::optim::SGDOptions(1e-4).momentum(0.9));
  ddp::torch::ZeroRedundancyOptimizer zero(net->parameters(), group, [](std::vector<at::Tensor> shard) {
    return std::make_unique<::torch::optim::SGD>(shard, ::torch::optim::SGDOptions(1e-4).momentum(0.9));
  });
  ::torch::nn::functional::mse_loss(model(x), y).backward();
  plain.step();
  zero.step();
  double sharded = static_cast<double>(ddp::torch::optimizer_state_bytes(zero.local_optimizer()));
  ddp::comm::AllReduceOptions max;
  max.op = ddp::comm::ReduceOp::kMax;
  group->all_reduce(ddp::comm::view(&sharded, 1), max)->wait();
  return {{"optimizer", "sgd-momentum"},
          {"state_bytes_plain", ddp::torch::optimizer_state_bytes(plain)},
          {"state_bytes_zero_max", sharded},
          {"world", group->size()}};
}

int hooks_main(int argc, char** argv) {
  HooksConfig c;
  CLI::App app{
      "ddp-bench hooks: LibTorch DDP step time and bytes per step with each comm hook (under ddp-launch)"};
  app.add_option("--layers", c.layers, "Linear+ReLU layers")->capture_default_str();
  app.add_option("--hidden", c.hidden, "layer width")->capture_default_str();
  app.add_option("--batch", c.batch, "batch per rank")->capture_default_str();
  app.add_option("--steps", c.steps, "timed steps per hook")->capture_default_str();
  app.add_option("--warmup", c.warmup, "untimed steps first (at least 3: PowerSGD compresses from step 2)")
      ->capture_default_str();
  app.add_option("--hooks", c.hooks, "comma-separated: compute, plain, fp16, powersgd<rank>")
      ->capture_default_str();
  app.add_option("--backend", c.backend, "our backend")->capture_default_str();
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  }
  if (c.layers < 1 || c.hidden < 1 || c.batch < 1 || c.steps < 1 || c.warmup < 3) {
    std::fprintf(stderr, "ddp-bench hooks: sizes and steps must be positive, --warmup at least 3\n");
    return 2;
  }
  try {
    ::torch::set_num_threads(1);
    ddp::InitOptions init;
    init.backend = c.backend;
    auto group = ddp::init_process_group(init);
    std::stringstream list(c.hooks);
    for (std::string name; std::getline(list, name, ',');) {
      auto row = measure(c, name, group);
      row["machine"] = ddp::bench::machine_json();
      if (group->rank() == 0) std::printf("%s\n", row.dump().c_str());
      std::fflush(stdout);
    }
    auto row = zero_memory(c, group);
    row["machine"] = ddp::bench::machine_json();
    if (group->rank() == 0) std::printf("%s\n", row.dump().c_str());
    ddp::destroy_process_group();
  } catch (const std::exception& e) {
    std::fprintf(stderr, "ddp-bench hooks: %s\n", e.what());
    return 1;
  }
  return 0;
}

const ddp::bench::Register kHooksSubcommand(
    "hooks", "LibTorch DDP step time and bytes per step per comm hook; ZeRO's state (ddp-launch)",
    hooks_main);

}  // namespace
