// ddp-bench torch: our LibTorch DistributedDataParallel against PyTorch's own, same model,
// same protocol, in one run, interleaved.
// The model: `--layers` x (Linear(hidden, hidden) + ReLU), MSE loss, SGD, batch `--batch` per
// rank, 1 thread per rank, `--nproc` ranks on this host. Per step: barrier, time one step
// (zero_grad, forward, backward, optimizer step), then the maximum over ranks. A "local" step
// is the same model unwrapped; a "ddp" step is the wrapped one. Rounds alternate ours (forked
// ranks, the tcp backend unless --backend) and PyTorch's (bench/torch_ddp_bench.py through
// --python: torch.nn.parallel.DistributedDataParallel over gloo). Each round checks that every
// rank ends with identical weights; a round that does not is an error, never a row. Output: one
// JSON row per system ("ours", "pytorch"): the medians over rounds, overhead = ddp_ms / local_ms.
//   ddp-bench torch --nproc 2 --rounds 5
#include <sys/wait.h>
#include <torch/nn/functional/loss.h>
#include <torch/nn/modules/container/sequential.h>
#include <torch/optim/sgd.h>
#include <torch/utils.h>
#include <unistd.h>
#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <string>
#include <vector>

#include "bench/bench.h"
#include "bench/machine_json.h"
#include "bench/torch_mlp.h"
#include "comm/init.h"
#include "ddp/torch/distributed_data_parallel.h"

namespace {

struct TorchConfig {
  int nproc = 2;
  int layers = 6;
  int hidden = 2048;
  int batch = 32;
  int steps = 5;
  int warmup = 2;
  int rounds = 3;
  std::string backend = "tcp";
  bool bucket_view = false;
  std::string python = "/usr/bin/python3";
  std::string script = DDP_BENCH_SOURCE_DIR "/torch_ddp_bench.py";
  bool no_pytorch = false;
};

// Per-step times (seconds), each the slowest rank's.
template <typename Model>
std::vector<double> timed_steps(const TorchConfig& c, Model& model, ddp::comm::ProcessGroup& group,
                                int steps) {
  ::torch::optim::SGD opt(model->parameters(), 1e-4);
  auto x = ::torch::randn({c.batch, c.hidden});
  auto y = ::torch::randn({c.batch, c.hidden});
  std::vector<double> times;
  for (int s = 0; s < steps; ++s) {
    group.barrier()->wait();
    auto t0 = std::chrono::steady_clock::now();
    opt.zero_grad();
    ::torch::nn::functional::mse_loss(model->forward(x), y).backward();
    opt.step();
    times.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  }
  ddp::comm::AllReduceOptions max;
  max.op = ddp::comm::ReduceOp::kMax;
  if (!times.empty()) group.all_reduce(ddp::comm::view(times.data(), times.size()), max)->wait();
  return times;
}

// Every rank holds the same weights (min == max over ranks, elementwise).
bool identical_everywhere(::torch::nn::Module& model, ddp::comm::ProcessGroup& group) {
  std::vector<at::Tensor> flat;
  for (const auto& p : model.parameters()) flat.push_back(p.detach().reshape(-1));
  auto lo = ::torch::cat(flat).contiguous(), hi = lo.clone();
  ddp::comm::AllReduceOptions op;
  op.op = ddp::comm::ReduceOp::kMin;
  group.all_reduce(ddp::comm::view(lo.data_ptr<float>(), static_cast<size_t>(lo.numel())), op)->wait();
  op.op = ddp::comm::ReduceOp::kMax;
  group.all_reduce(ddp::comm::view(hi.data_ptr<float>(), static_cast<size_t>(hi.numel())), op)->wait();
  return ::torch::equal(lo, hi);
}

// One forked rank of ours; rank 0 writes its JSON row to `out`.
int our_rank(const TorchConfig& c, int rank, const std::string& store, int out) {
  ::torch::set_num_threads(1);
  ddp::InitOptions init;
  init.backend = c.backend;
  init.init_method = "file://" + store;
  init.rank = rank;
  init.world_size = c.nproc;
  auto group = ddp::init_process_group(init);
  auto local = ddp::bench::make_mlp(c.layers, c.hidden, rank);
  ddp::EngineOptions options;
  options.gradient_as_bucket_view = c.bucket_view;
  ddp::torch::DistributedDataParallel wrapped(ddp::bench::make_mlp(c.layers, c.hidden, rank), group, options);
  timed_steps(c, local, *group, c.warmup);
  auto local_times = timed_steps(c, local, *group, c.steps);
  timed_steps(c, wrapped, *group, c.warmup);
  auto ddp_times = timed_steps(c, wrapped, *group, c.steps);
  const bool same = identical_everywhere(*wrapped->module(), *group);
  if (rank == 0) {
    size_t params = 0;
    for (const auto& p : local->parameters()) params += static_cast<size_t>(p.numel());
    const double l = ddp::bench::median(local_times) * 1e3, d = ddp::bench::median(ddp_times) * 1e3;
    nlohmann::json row{{"system", "ours"}, {"params", params},  {"local_ms", l},
                       {"ddp_ms", d},      {"overhead", d / l}, {"identical", same}};
    std::string line = row.dump() + "\n";
    if (::write(out, line.data(), line.size()) != static_cast<ssize_t>(line.size())) return 1;
  }
  ddp::destroy_process_group();
  return same ? 0 : 1;
}

nlohmann::json run_ours(const TorchConfig& c) {
  int fds[2];
  if (::pipe(fds) != 0) throw std::runtime_error("pipe failed");
  auto dir = std::filesystem::temp_directory_path() / ("ddp-bench-torch-" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  std::vector<pid_t> pids;
  for (int r = 0; r < c.nproc; ++r) {
    pid_t pid = ::fork();
    if (pid == 0) {
      ::close(fds[0]);
      int rc = 1;
      try {
        rc = our_rank(c, r, (dir / "store").string(), fds[1]);
      } catch (const std::exception& e) {
        std::fprintf(stderr, "ddp-bench torch: rank %d: %s\n", r, e.what());
      }
      ::_exit(rc);
    }
    pids.push_back(pid);
  }
  ::close(fds[1]);
  std::string text;
  char buf[4096];
  for (ssize_t n; (n = ::read(fds[0], buf, sizeof buf)) > 0;) text.append(buf, static_cast<size_t>(n));
  ::close(fds[0]);
  bool ok = true;
  for (pid_t pid : pids) {
    int status = 0;
    ::waitpid(pid, &status, 0);
    ok = ok && WIFEXITED(status) && WEXITSTATUS(status) == 0;
  }
  std::filesystem::remove_all(dir);
  if (!ok || text.empty()) throw std::runtime_error("our ranks failed (see above)");
  return nlohmann::json::parse(text);
}

nlohmann::json run_pytorch(const TorchConfig& c) {
  std::string cmd = c.python + " " + c.script + " --world " + std::to_string(c.nproc) + " --layers " +
                    std::to_string(c.layers) + " --hidden " + std::to_string(c.hidden) + " --batch " +
                    std::to_string(c.batch) + " --steps " + std::to_string(c.steps) + " --warmup " +
                    std::to_string(c.warmup);
  FILE* p = ::popen(cmd.c_str(), "r");
  if (!p) throw std::runtime_error("cannot run " + c.python);
  std::string text;
  char buf[4096];
  for (size_t n; (n = std::fread(buf, 1, sizeof buf, p)) > 0;) text.append(buf, n);
  const int status = ::pclose(p);
  if (status != 0 || text.empty()) throw std::runtime_error("PyTorch's side failed: " + cmd);
  auto row = nlohmann::json::parse(text.substr(text.rfind('{')));
  if (!row.value("identical", false))
    throw std::runtime_error("PyTorch's ranks ended with different weights");
  return row;
}

// v rounded to 1/per (per = 100: hundredths), dividing last so the JSON prints 0.83, not 0.830...01.
double round_to(double v, double per) { return std::round(v * per) / per; }

void print_summary(const char* system, const std::vector<nlohmann::json>& rows) {
  std::vector<double> local, ddp, overhead;
  local.reserve(rows.size());
  ddp.reserve(rows.size());
  overhead.reserve(rows.size());
  for (const auto& r : rows) {
    local.push_back(round_to(r["local_ms"].get<double>(), 100));
    ddp.push_back(round_to(r["ddp_ms"].get<double>(), 100));
    overhead.push_back(round_to(ddp.back() / local.back(), 10000));
  }
  const double l = ddp::bench::median(local), d = ddp::bench::median(ddp);
  // Medians, then every round's figures (a reader judges the spread), then the machine.
  nlohmann::json out{{"system", system},
                     {"params", rows.front()["params"]},
                     {"local_ms", round_to(l, 100)},
                     {"ddp_ms", round_to(d, 100)},
                     {"overhead", round_to(d / l, 10000)},
                     {"rounds", rows.size()},
                     {"local_ms_per_round", local},
                     {"ddp_ms_per_round", ddp},
                     {"overhead_per_round", overhead},
                     {"machine", ddp::bench::machine_json()}};
  std::printf("%s\n", out.dump().c_str());
}

int torch_main(int argc, char** argv) {
  TorchConfig c;
  CLI::App app{"ddp-bench torch: our LibTorch DDP against PyTorch's DDP (gloo), same model, interleaved"};
  app.add_option("--nproc", c.nproc, "ranks per system")->capture_default_str();
  app.add_option("--layers", c.layers, "Linear+ReLU layers")->capture_default_str();
  app.add_option("--hidden", c.hidden, "layer width")->capture_default_str();
  app.add_option("--batch", c.batch, "batch per rank")->capture_default_str();
  app.add_option("--steps", c.steps, "timed steps per measurement")->capture_default_str();
  app.add_option("--warmup", c.warmup, "untimed steps first")->capture_default_str();
  app.add_option("--rounds", c.rounds, "alternating rounds of ours and PyTorch's")->capture_default_str();
  app.add_option("--backend", c.backend, "our backend: tcp, gloo, ...")->capture_default_str();
  app.add_flag("--bucket-view", c.bucket_view, "ours with gradient_as_bucket_view");
  app.add_option("--python", c.python, "the Python with torch (Debian's python3-torch)")
      ->capture_default_str();
  app.add_option("--script", c.script, "PyTorch's side")->capture_default_str();
  app.add_flag("--no-pytorch", c.no_pytorch, "measure ours only");
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  }
  if (c.nproc < 1 || c.layers < 1 || c.hidden < 1 || c.batch < 1 || c.steps < 1 || c.rounds < 1) {
    std::fprintf(stderr, "ddp-bench torch: sizes, steps and rounds must be positive\n");
    return 2;
  }
  try {
    std::vector<nlohmann::json> ours, theirs;
    for (int r = 0; r < c.rounds; ++r) {
      ours.push_back(run_ours(c));
      if (!c.no_pytorch) theirs.push_back(run_pytorch(c));
    }
    print_summary("ours", ours);
    if (!c.no_pytorch) print_summary("pytorch", theirs);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "ddp-bench torch: %s\n", e.what());
    return 1;
  }
  return 0;
}

const ddp::bench::Register kTorchSubcommand(
    "torch", "LibTorch DDP step vs PyTorch DDP (6x Linear(2048) MLP, interleaved)", torch_main);

}  // namespace
