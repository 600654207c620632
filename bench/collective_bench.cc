// ddp-bench collective: latency and bandwidth of one collective over a list of sizes.
//
//   ddp-bench collective --op all_reduce --backend tcp --sizes 4,1K,1M,256M --iters 20 --world-size 2
//
// Ranks: under ddp-launch / mpirun / by hand (RANK, WORLD_SIZE, DDP_STORE or MASTER_ADDR/PORT)
// every process is one rank; with --world-size N and no rank in the environment this process
// forks N local ranks that meet in a TCPStore it hosts (mpi and mpi-direct re-run themselves
// under mpirun instead). Rank 0 prints one line per size: JSON objects, or a table. Sizes are
// the bytes of the full buffer (all_gather: the output, reduce_scatter: the input), float32.
// Timing and checks: collective_timing.h (nccl-tests' method: per-op time of a loop of N ops,
// max over ranks, median of R repeats). algbw = bytes / time; busbw as nccl-tests defines it:
// all_reduce x 2(n-1)/n, all_gather and reduce_scatter x (n-1)/n, broadcast x 1. A wrong result
// on any rank prints no row and exits non-zero.
#include <sys/wait.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <nlohmann/json.hpp>

#include "bench/bench.h"
#include "bench/collective_runners.h"
#include "bench/collective_timing.h"
#include "common/env.h"
#include "common/error.h"
#include "rendezvous/tcp_store.h"

namespace ddp::bench {
namespace {

struct Flags {
  std::string op = "all_reduce";
  std::string backend = "tcp";
  std::string sizes = "4,1K,64K,1M,16M,64M,256M";
  int iters = 20;
  int warmup = 5;
  int repeats = 5;
  std::string device = "cpu";
  std::string format = "json";
  int world_size = 0;
  int corrupt_rank = -1;
};

size_t parse_size(const std::string& text) {
  size_t pos = 0;
  double v = 0;
  try {
    v = std::stod(text, &pos);
  } catch (const std::exception&) {
    DDP_THROW(InvalidArgument, "--sizes: '", text, "' is not a size (e.g. 4, 1K, 16M, 1G)");
  }
  const std::string unit = text.substr(pos);
  double mult = 1;
  if (unit == "K" || unit == "KiB" || unit == "k") mult = 1024;
  else if (unit == "M" || unit == "MiB") mult = 1024.0 * 1024;
  else if (unit == "G" || unit == "GiB") mult = 1024.0 * 1024 * 1024;
  else if (!unit.empty() && unit != "B") DDP_THROW(InvalidArgument, "--sizes: unknown unit in '", text, "'");
  if (v < 0) DDP_THROW(InvalidArgument, "--sizes: negative size '", text, "'");
  return static_cast<size_t>(v * mult);
}

std::vector<size_t> parse_sizes(const std::string& list) {
  std::vector<size_t> out;
  size_t start = 0;
  while (start <= list.size()) {
    size_t comma = list.find(',', start);
    if (comma == std::string::npos) comma = list.size();
    if (comma > start) out.push_back(parse_size(list.substr(start, comma - start)));
    start = comma + 1;
  }
  return out;
}

double busbw_factor(CollOp op, int n) {
  switch (op) {
    case CollOp::kAllReduce: return 2.0 * (n - 1) / n;
    case CollOp::kBroadcast: return 1;
    case CollOp::kAllGather:
    case CollOp::kReduceScatter: return static_cast<double>(n - 1) / n;
  }
  return 1;
}

// Runs small all_reduces for 100 ms before anything is timed (every backend alike): freshly
// started ranks often share one core until the scheduler's balancer spreads them, and the
// first sizes would otherwise measure that. The ranks stop together: all agree it is time.
void settle(CollectiveRunner& runner) {
  const auto start = std::chrono::steady_clock::now();
  for (;;) {
    double busy = std::chrono::steady_clock::now() - start < std::chrono::milliseconds(100) ? 1 : 0;
    runner.max_over_ranks(&busy, 1);
    if (busy == 0) return;
  }
}

BufferOptions memory_of(const Flags& f) {
  BufferOptions m;
  if (f.device == "cpu") return m;
  if (!cuda_built()) DDP_THROW(InvalidArgument, "--device cuda: this ddp-bench was built without CUDA (no NCCL/CUDA found at configure)");
  if (cuda_devices() == 0) DDP_THROW(InvalidArgument, "--device cuda: no CUDA device is visible");
  m.kind = MemoryKind::kCuda;
  m.device = cuda_device_of_this_rank();
  return m;
}

void print_header(const Flags& f) {
  if (f.format != "table") return;
  std::printf("%-14s %-12s %-4s %5s %12s %11s %11s %11s %11s %11s\n", "op", "backend", "dev", "world", "bytes",
              "median_us", "min_us", "max_us", "algbw_GBps", "busbw_GBps");
}

void print_row(const Flags& f, CollOp op, int n, size_t bytes, const SizeResult& r) {
  const double med = median(r.per_op_us);
  const double lo = *std::min_element(r.per_op_us.begin(), r.per_op_us.end());
  const double hi = *std::max_element(r.per_op_us.begin(), r.per_op_us.end());
  const double algbw = med > 0 ? static_cast<double>(bytes) / (med * 1e-6) / 1e9 : 0;
  const double busbw = algbw * busbw_factor(op, n);
  if (f.format == "json") {
    nlohmann::json j = {{"op", to_string(op)},   {"backend", f.backend},  {"device", f.device},
                        {"world_size", n},       {"bytes", bytes},        {"iters", f.iters},
                        {"repeats", f.repeats},  {"median_us", med},      {"min_us", lo},
                        {"max_us", hi},          {"samples_us", r.per_op_us}, {"algbw_GBps", algbw},
                        {"busbw_GBps", busbw},   {"timing", "max over ranks of per-op time, loop of iters ops"},
                        {"correct", true}};
    std::printf("%s\n", j.dump().c_str());
  } else {
    std::printf("%-14s %-12s %-4s %5d %12zu %11.2f %11.2f %11.2f %11.3f %11.3f\n", to_string(op), f.backend.c_str(),
                f.device.c_str(), n, bytes, med, lo, hi, algbw, busbw);
  }
  std::fflush(stdout);
}

// A wrong result somewhere (every rank knows): no row, non-zero exit. The ranks leave together,
// after every message is out (a launcher may kill the others once one rank has exited).
int refuse(CollectiveRunner& runner, const SizeResult& r) {
  if (!r.error.empty()) {
    std::fprintf(stderr, "ddp-bench collective: rank %d: WRONG RESULT: %s\n", runner.rank(), r.error.c_str());
  } else {
    std::fprintf(stderr, "ddp-bench collective: rank %d: stopping: another rank's result was wrong\n", runner.rank());
  }
  std::fflush(stderr);
  try {
    runner.barrier();
  } catch (const std::exception&) {  // leaving anyway
  }
  return 1;
}

int run_rank(const Flags& f) {
  const CollOp op = parse_coll_op(f.op);
  TimingOptions t;
  t.warmup = f.warmup;
  t.iters = f.iters;
  t.repeats = f.repeats;
  t.memory = memory_of(f);
  t.corrupt_rank = f.corrupt_rank;
  RunnerOptions ro;
  ro.backend = f.backend;
  ro.memory = t.memory;
  auto runner = make_runner(ro);
  const int n = runner->size();
  if (runner->rank() == 0) print_header(f);
  settle(*runner);
  for (size_t bytes : parse_sizes(f.sizes)) {
    // Per-rank count; the full buffer is rounded down to whole elements per rank.
    const bool split = op == CollOp::kAllGather || op == CollOp::kReduceScatter;
    const size_t count = split ? bytes / sizeof(float) / n : bytes / sizeof(float);
    if (count == 0) {
      // Below one element per rank there is nothing to move (and Gloo divides by the count).
      if (runner->rank() == 0) std::fprintf(stderr, "ddp-bench collective: %zu bytes is under one float per rank: skipped\n", bytes);
      continue;
    }
    const SizeResult r = measure_size(*runner, op, count, t);
    if (r.wrong) return refuse(*runner, r);
    if (runner->rank() == 0) print_row(f, op, n, (split ? count * n : count) * sizeof(float), r);
  }
  return 0;
}

std::string self_exe() {
  char self[4096];
  const ssize_t len = ::readlink("/proc/self/exe", self, sizeof(self) - 1);
  if (len <= 0) DDP_THROW_ERRNO("readlink(/proc/self/exe)");
  return std::string(self, static_cast<size_t>(len));
}

// mpi and mpi-direct need MPI's own launcher: re-run this command line under mpirun.
int exec_mpirun(int world, int argc, char** argv) {
  std::vector<std::string> args = {"mpirun", "-np", std::to_string(world), "--allow-run-as-root", "--oversubscribe",
                                   "--bind-to", "none", self_exe()};
  for (int i = 0; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--world-size" || a == "-n") {
      ++i;  // drop the flag and its value: mpirun gives the size now
      continue;
    }
    if (a.rfind("--world-size=", 0) == 0) continue;
    args.push_back(a);
  }
  std::vector<char*> cargv;
  for (auto& a : args) cargv.push_back(a.data());
  cargv.push_back(nullptr);
  ::execvp("mpirun", cargv.data());
  DDP_THROW_ERRNO("execvp(mpirun)");
}

// Starts `world` ranks that meet in a TCPStore hosted here; returns the worst exit status.
// Each rank re-executes this command line, as launchers start workers: the kernel places a
// process on the idlest CPU at exec, while forked children start stacked on their parent's
// (and stay there for the first milliseconds: a short run measured nothing but that).
int fork_ranks(const Flags& f, int argc, char** argv) {
  rdzv::TCPStoreOptions so;
  so.host = "127.0.0.1";
  so.is_server = true;
  rdzv::TCPStore store(so);  // serves from its own threads: the children only exec
  std::vector<std::string> args = {self_exe()};
  for (int i = 0; i < argc; ++i) args.emplace_back(argv[i]);
  std::vector<char*> cargv;
  for (auto& a : args) cargv.push_back(a.data());
  cargv.push_back(nullptr);
  std::vector<pid_t> pids;
  for (int r = 0; r < f.world_size; ++r) {
    // Everything is built before fork: the child of a threaded process may not allocate.
    std::vector<std::string> env = {"DDP_STORE=127.0.0.1:" + std::to_string(store.port()),
                                    "RANK=" + std::to_string(r), "WORLD_SIZE=" + std::to_string(f.world_size),
                                    "LOCAL_RANK=" + std::to_string(r), "DDP_RUN_ID=bench-" + std::to_string(::getpid())};
    for (char** e = environ; *e != nullptr; ++e) {
      const std::string kv = *e;
      const std::string key = kv.substr(0, kv.find('='));
      if (key != "DDP_STORE" && key != "RANK" && key != "WORLD_SIZE" && key != "LOCAL_RANK" && key != "DDP_RUN_ID") {
        env.push_back(kv);
      }
    }
    std::vector<char*> cenv;
    for (auto& e : env) cenv.push_back(e.data());
    cenv.push_back(nullptr);
    const pid_t pid = ::fork();
    if (pid < 0) DDP_THROW_ERRNO("fork");
    if (pid == 0) {
      ::execve(cargv[0], cargv.data(), cenv.data());
      const char msg[] = "ddp-bench collective: execve of a rank failed\n";
      (void)!::write(2, msg, sizeof(msg) - 1);
      ::_exit(127);
    }
    pids.push_back(pid);
  }
  // A rank that fails takes the others down: they would wait for it until the group's timeout.
  int worst = 0;
  for (size_t left = pids.size(); left > 0; --left) {
    int status = 0;
    const pid_t pid = ::waitpid(-1, &status, 0);
    if (pid < 0) break;
    const int code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    if (code != 0 && worst == 0) {
      for (pid_t other : pids) {
        if (other != pid) ::kill(other, SIGTERM);
      }
    }
    worst = std::max(worst, code);
  }
  return worst;
}

int collective_main(int argc, char** argv) {
  CLI::App app("ddp-bench collective: one collective over a list of sizes; max over ranks, medians, every op checked");
  Flags f;
  app.add_option("--op", f.op, "all_reduce, broadcast, all_gather, reduce_scatter")->capture_default_str();
  app.add_option("--backend", f.backend, "tcp, gloo, mpi, nccl, gloo-direct, mpi-direct")->capture_default_str();
  app.add_option("--sizes", f.sizes, "bytes of the full buffer, comma-separated (K, M, G suffixes)")
      ->capture_default_str();
  app.add_option("--iters", f.iters, "ops per timed loop (N)")->capture_default_str()->check(CLI::PositiveNumber);
  app.add_option("--repeats", f.repeats, "timed loops per size (R): median, min and max are printed")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  app.add_option("--warmup", f.warmup, "untimed ops first")->capture_default_str()->check(CLI::NonNegativeNumber);
  app.add_option("--device", f.device, "cpu (host buffers) or cuda (device buffers: nccl, or tcp/gloo staged)")
      ->capture_default_str()
      ->check(CLI::IsMember({"cpu", "cuda"}));
  app.add_option("--format", f.format, "json or table")->capture_default_str()->check(CLI::IsMember({"json", "table"}));
  // Hidden: the negative control of the bench's own ctest (a wrong result must be refused).
  app.add_option("--inject-wrong-result", f.corrupt_rank, "")->group("");
  app.add_option("-n,--world-size", f.world_size, "start this many local ranks (without a launcher)")
      ->check(CLI::PositiveNumber);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  }
  try {
    parse_coll_op(f.op);
    parse_sizes(f.sizes);
    const bool has_rank = env::get("RANK") || env::get("OMPI_COMM_WORLD_RANK") || env::get("SLURM_PROCID");
    if (f.world_size > 0 && !has_rank) {
      if (f.backend == "mpi" || f.backend == "mpi-direct") return exec_mpirun(f.world_size, argc, argv);  // argv[0] is "collective"
      return fork_ranks(f, argc, argv);
    }
    return run_rank(f);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "ddp-bench collective: %s\n", e.what());
    return 1;
  }
}

const Register kRegister("collective", "latency/bandwidth of all_reduce, broadcast, all_gather, reduce_scatter",
                         collective_main);

}  // namespace
}  // namespace ddp::bench
