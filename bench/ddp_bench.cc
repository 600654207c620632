// ddp-bench ddp: what overlap buys. Models of 1 M, 25 M and 100 M float parameters in
// realistic layer sizes; backward compute per layer (a calibrated busy loop, or a sleep that
// models an accelerator computing while the CPU is free); per-step medians (max over ranks)
// of: local only; communication only; the engine without overlap (all_reduce after backward,
// fairseq-style: the peer); the engine with overlap (mark_ready per layer). Reports the share of
// communication hidden, (no-overlap - overlap) / comm, unclamped: negative when overlapping
// made the step slower; and step / max(compute, communication) (target <= 1.1).
// Before every step that communicates each rank writes fresh gradients (a value per rank, step
// and parameter; untimed, as backward would), and after it checks every element against the
// average over ranks: a wrong average fails the run (non-zero exit, no more rows).
//
// Ranks: under ddp-launch (RANK/WORLD_SIZE set: env://) or forked here (--nproc, file:// store).
#include <CLI/CLI.hpp>

#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <thread>
#include <vector>

#include "bench/bench.h"
#include "comm/init.h"
#include "common/error.h"
#include "ddp/comm_hook.h"
#include "ddp/engine.h"

namespace {

using ddp::bench::Clock;
using ddp::comm::view;

struct Model {
  std::string name;
  int layers;
  int width_in;
  int width_out;
};

// Stacks of square-ish linear layers (weight + bias per layer): ~1 M, ~25 M, ~100 M floats.
const std::vector<Model> kModels{{"1M", 4, 512, 512}, {"25M", 24, 1024, 1024}, {"100M", 24, 2048, 2048}};

struct Config {
  std::string backend = "tcp";
  int nproc = 2;
  int steps = 10;
  int warmup = 2;
  std::string compute = "spin";  // spin | sleep
  double compute_ratio = 1.0;    // backward compute = ratio x measured communication time
  double bucket_cap_mb = 25;
  bool bucket_view = false;        // gradient_as_bucket_view: no copies in or out
  std::string hook = "allreduce";  // allreduce | fp16 | bf16 (the compression hooks)
  std::vector<std::string> models{"1M", "25M", "100M"};
  std::string init_method;  // set for forked ranks
};

void busy_for(double seconds, bool spin) {
  auto end = Clock::now() + std::chrono::duration<double>(seconds);
  if (!spin) {
    std::this_thread::sleep_until(end);
    return;
  }
  volatile uint64_t sink = 0;
  while (Clock::now() < end) {
    for (int i = 0; i < 256; ++i) sink = sink + static_cast<uint64_t>(i);
  }
}

struct Layer {
  std::vector<float> w, gw, b, gb;
  size_t wid = 0, bid = 0;
};

// The gradient each rank writes for parameter p before step s: exact in float32, different per
// rank, parameter and step, so a stale, partial or misplaced average shows.
float grad_value(int rank, size_t p, int step) {
  return static_cast<float>((rank + 1) + static_cast<int>(p % 5)) * static_cast<float>(step % 7 + 1) / 256.0f;
}

float average_value(int world, size_t p, int step) {
  return (static_cast<float>(world + 1) / 2 + static_cast<float>(p % 5)) * static_cast<float>(step % 7 + 1) /
         256.0f;
}

// Fresh gradients for `step` (what backward would have written), through the engine's views.
void write_grads(const ddp::Engine& e, int step) {
  const int rank = e.group()->rank();
  for (size_t p = 0; p < e.num_params(); ++p) {
    ddp::comm::Buffer b = e.grad(p);
    float* d = static_cast<float*>(b.data);
    std::fill(d, d + b.count, grad_value(rank, p, step));
  }
}

// Every element of every gradient against the average over ranks; throws on the first wrong.
// The negative control of the bench's own ctest (hidden --inject-wrong-result RANK): that
// rank's average of step 3 gets one wrong element before the check, which must then fail.
int g_corrupt_rank = -1;
// How far an averaged gradient may be from the exact average: float32 rounding, or with a
// compression hook the 16-bit float's (half a unit in the last place, twice: cast, then sum).
float g_tolerance = 1e-6f;

void check_grads(const ddp::Engine& e, int step) {
  const int world = e.group()->size();
  if (e.group()->rank() == g_corrupt_rank && step == 3) static_cast<float*>(e.grad(0).data)[0] += 1.0f;
  for (size_t p = 0; p < e.num_params(); ++p) {
    ddp::comm::Buffer b = e.grad(p);
    const float* d = static_cast<const float*>(b.data);
    const float want = average_value(world, p, step);
    for (size_t i = 0; i < b.count; ++i) {
      if (std::fabs(d[i] - want) > g_tolerance * std::fabs(want)) {
        DDP_THROW(Error, "WRONG RESULT: step ", step, ", rank ", e.group()->rank(),
                  ": gradient of parameter ", p, " element ", i, " is ", d[i], ", expected the average ",
                  want);
      }
    }
  }
}

// One step of the slowest rank, seconds (ranks start together after a barrier). With an
// engine, fresh gradients go in before (untimed) and their average is checked after.
double time_step(ddp::comm::ProcessGroup& g, const std::function<void()>& step,
                 const ddp::Engine* checked = nullptr, int step_no = 0) {
  if (checked) write_grads(*checked, step_no);
  g.barrier()->wait();
  auto t0 = Clock::now();
  step();
  double dt = std::chrono::duration<double>(Clock::now() - t0).count();
  g.all_reduce(view(&dt, 1), {ddp::comm::ReduceOp::kMax})->wait();
  if (checked) check_grads(*checked, step_no);
  return dt;
}

void bench_model(const Config& c, const Model& m, const ddp::comm::ProcessGroupPtr& g) {
  std::vector<Layer> layers(m.layers);
  ddp::EngineOptions o;
  o.bucket_cap_mb = c.bucket_cap_mb;
  o.gradient_as_bucket_view = c.bucket_view;
  ddp::Engine engine(g, o);
  if (c.hook == "fp16") engine.register_comm_hook(ddp::fp16_compress_hook());
  if (c.hook == "bf16") engine.register_comm_hook(ddp::bf16_compress_hook());
  size_t total = 0;
  for (int l = 0; l < m.layers; ++l) {
    Layer& L = layers[l];
    L.w.assign(static_cast<size_t>(m.width_in) * m.width_out, 0.01f);
    L.gw.assign(L.w.size(), 0.001f * static_cast<float>(g->rank() + 1));
    L.b.assign(m.width_out, 0.0f);
    L.gb.assign(m.width_out, 0.001f);
    std::string n = "layer" + std::to_string(l);
    // With bucket views the engine owns the gradients (initialized from these buffers).
    L.wid = engine.register_param({n + ".weight",
                                   view(L.w.data(), L.w.size()),
                                   view(L.gw.data(), L.gw.size()),
                                   {m.width_out, m.width_in}});
    L.bid = engine.register_param(
        {n + ".bias", view(L.b.data(), L.b.size()), view(L.gb.data(), L.gb.size()), {}});
    total += L.w.size() + L.b.size();
  }
  engine.finalize();
  const bool spin = c.compute == "spin";

  // Communication alone (every bucket after an empty backward) calibrates the compute.
  auto comm_step = [&] { engine.finish_backward(); };
  std::vector<double> calib;
  calib.reserve(5);
  int step_no = 0;
  for (int i = 0; i < c.warmup + 2; ++i)
    time_step(*g, comm_step, &engine, step_no++);  // first touch, bucket rebuild
  for (int i = 0; i < 5; ++i) calib.push_back(time_step(*g, comm_step, &engine, step_no++));
  const double compute_total = ddp::bench::median(calib) * c.compute_ratio;
  auto layer_time = [&](int l) {
    return compute_total * static_cast<double>(layers[l].w.size() + layers[l].b.size()) /
           static_cast<double>(total);
  };
  auto local_step = [&] {
    for (int l = m.layers - 1; l >= 0; --l) busy_for(layer_time(l), spin);
  };
  auto no_overlap_step = [&] {
    local_step();
    engine.finish_backward();  // the fairseq way: everything after backward
  };
  auto overlap_step = [&] {
    for (int l = m.layers - 1; l >= 0; --l) {
      busy_for(layer_time(l), spin);
      engine.mark_ready(layers[l].wid);
      engine.mark_ready(layers[l].bid);
    }
    engine.finish_backward();
  };
  // The four modes interleaved step by step, so load changes on a shared machine hit all alike.
  std::vector<double> t_local, t_comm, t_no, t_ovl;
  for (int s = 0; s < c.warmup + c.steps; ++s) {
    double a = time_step(*g, local_step), b = time_step(*g, comm_step, &engine, step_no++);
    double n = time_step(*g, no_overlap_step, &engine, step_no++),
           o = time_step(*g, overlap_step, &engine, step_no++);
    if (s < c.warmup) continue;
    t_local.push_back(a);
    t_comm.push_back(b);
    t_no.push_back(n);
    t_ovl.push_back(o);
  }
  const double local = ddp::bench::median(t_local), comm = ddp::bench::median(t_comm);
  const double no_overlap = ddp::bench::median(t_no), overlap = ddp::bench::median(t_ovl);
  if (g->rank() == 0) {
    const double ideal = std::max(local, comm);
    // Not clamped: below 0 overlapping cost time, above 1 it saved more than the communication.
    const double hidden = comm > 0 ? (no_overlap - overlap) / comm : 0.0;
    std::printf("%-5s %10zu %7zu %9.1f %9.1f %11.1f %9.1f %+8.0f%% %9.2f\n", m.name.c_str(), total,
                engine.buckets().size(), local * 1e3, comm * 1e3, no_overlap * 1e3, overlap * 1e3,
                hidden * 100, overlap / ideal);
    std::fflush(stdout);
  }
}

int worker(const Config& c, int rank, int world) {
  ddp::InitOptions init;
  init.backend = c.backend;
  if (!c.init_method.empty()) {
    init.init_method = c.init_method;
    init.rank = rank;
    init.world_size = world;
  }
  auto g = ddp::init_process_group(init);
  if (g->rank() == 0) {
    std::printf(
        "ddp-bench ddp: %d ranks, backend %s, compute %s (ratio %.2f of communication), bucket cap %.0f MB, "
        "%s, hook %s, median of %d steps (slowest rank), every averaged gradient checked\n",
        g->size(), c.backend.c_str(), c.compute.c_str(), c.compute_ratio, c.bucket_cap_mb,
        c.bucket_view ? "bucket views" : "gradient copies", c.hook.c_str(), c.steps);
    std::printf("%-5s %10s %7s %9s %9s %11s %9s %9s %9s\n", "model", "params", "buckets", "local ms",
                "comm ms", "no-ovl ms", "ovl ms", "hidden", "ovl/max");
  }
  for (const auto& name : c.models) {
    for (const auto& m : kModels) {
      if (m.name == name) bench_model(c, m, g);
    }
  }
  ddp::destroy_process_group();
  return 0;
}

int run(Config c) {
  if (ddp::ranks_from_env().world_size > 0) return worker(c, -1, -1);  // under ddp-launch, mpirun, srun
  auto dir = std::filesystem::temp_directory_path() / ("ddp-bench-" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  c.init_method = "file://" + (dir / "store").string();
  std::vector<pid_t> pids;
  for (int r = 0; r < c.nproc; ++r) {
    pid_t pid = ::fork();
    if (pid < 0) {
      std::perror("fork");
      return 1;
    }
    if (pid == 0) {
      int rc = 1;
      try {
        rc = worker(c, r, c.nproc);
      } catch (const std::exception& e) {
        std::fprintf(stderr, "ddp-bench ddp: rank %d: %s\n", r, e.what());
      }
      std::fflush(stdout);
      ::_exit(rc);
    }
    pids.push_back(pid);
  }
  int failed = 0;
  for (pid_t pid : pids) {
    int status = 0;
    ::waitpid(pid, &status, 0);
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) failed = 1;
  }
  std::filesystem::remove_all(dir);
  return failed;
}

int ddp_main(int argc, char** argv) {
  Config c;
  CLI::App app{"ddp-bench ddp: step time of the DDP engine with and without overlap"};
  app.add_option("--backend", c.backend, "tcp, gloo, ...")->capture_default_str();
  app.add_option("--nproc", c.nproc, "ranks to fork (ignored under ddp-launch)")->capture_default_str();
  app.add_option("--steps", c.steps, "timed steps per measurement")->capture_default_str();
  app.add_option("--warmup", c.warmup, "untimed steps first")->capture_default_str();
  app.add_option("--compute", c.compute, "spin (busy loop) or sleep (an accelerator computing)")
      ->check(CLI::IsMember({"spin", "sleep"}))
      ->capture_default_str();
  app.add_option("--compute-ratio", c.compute_ratio, "backward compute as a multiple of communication time")
      ->capture_default_str();
  app.add_option("--bucket-cap-mb", c.bucket_cap_mb, "engine bucket cap")->capture_default_str();
  app.add_option("--models", c.models, "1M, 25M, 100M (several: 1M,25M or 1M 25M)")
      ->delimiter(',')
      ->check(CLI::IsMember({"1M", "25M", "100M"}))
      ->capture_default_str();
  app.add_flag("--bucket-view", c.bucket_view, "gradient_as_bucket_view (no gradient copies)");
  app.add_option("--hook", c.hook,
                 "allreduce, or a compression hook: fp16, bf16 (the bucket cast to 16 bits)")
      ->check(CLI::IsMember({"allreduce", "fp16", "bf16"}))
      ->capture_default_str();
  app.add_option("--inject-wrong-result", g_corrupt_rank, "")->group("");
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  }
  if (c.nproc < 1 || c.steps < 1 || c.compute_ratio < 0) {
    std::fprintf(stderr, "ddp-bench ddp: --nproc and --steps must be positive, --compute-ratio >= 0\n");
    return 2;
  }
  if (c.hook == "fp16") g_tolerance = 4e-3f;  // 2^-11 per rounding, three roundings, and margin
  if (c.hook == "bf16") g_tolerance = 3e-2f;  // 2^-8 likewise
  try {
    return run(c);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "ddp-bench ddp: %s\n", e.what());
    return 1;
  }
}

const ddp::bench::Register kDdpSubcommand(
    "ddp", "DDP engine step time: local, no overlap, overlap (1M/25M/100M params)", ddp_main);

}  // namespace
