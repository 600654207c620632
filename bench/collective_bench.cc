// ddp-bench collective: latency and bandwidth of one collective over a list of sizes.
//   ddp-bench collective --op all_reduce --backend tcp --sizes 4,1K,1M,256M --iters 20 --world-size 2
//   ddp-bench collective -n 2 --compare mpi,gloo     # ours beside Open MPI and Gloo, same run
//   ddp-bench collective -n 2 --buffers 4            # 4 buffers per process (all_reduce_multi);
//   ddp-bench collective -n 8                        # ... against 8 ranks of one buffer each
// Ranks: under ddp-launch / mpirun / by hand (RANK, WORLD_SIZE, DDP_STORE or MASTER_ADDR/PORT)
// every process is one rank; with --world-size N and no rank in the environment this process
// starts N local ranks (bench/local_ranks.h). Rank 0 prints one line (JSON, or a table) per
// implementation and size, nccl-tests' sizes (the full buffer's bytes, float32, root 0) and
// figures (algbw, busbw). Timing and checks: collective_timing.h; how it measures: docs/design.md.
// A wrong result on any rank prints no row and exits non-zero.
#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "bench/bench.h"
#include "bench/collective_runners.h"
#include "bench/collective_timing.h"
#include "bench/core_round_trip.h"
#include "bench/local_ranks.h"
#include "bench/machine_json.h"
#include "bench/sizes.h"
#include "common/error.h"
#include "common/machine.h"
#include "common/settings.h"

namespace ddp::bench {
namespace {

// Untimed ops before each repeat of a size after its first (see the rep loop in run_op).
constexpr int kRewarmOps = 2;

struct CollectiveFlags {
  std::string op = "all_reduce";
  std::string backend = "tcp";
  std::string sizes = "4,1K,64K,1M,16M,64M,256M";
  int iters = 20;
  int warmup = 5;
  int repeats = 5;
  std::string device = "cpu";
  std::string memory = "host";  // host, or group: the group's memory (ProcessGroup::allocate)
  std::string format = "json";
  int world_size = 0;
  std::string bind = "auto";  // -n's ranks: a CPU each where there are enough (auto), or not (none)
  int corrupt_rank = -1;
  std::string compare;  // peers measured in the same run, interleaved: "mpi,gloo"
  int buffers = 1;      // per process: the *_multi ops (all_reduce, broadcast)
};

// The implementations one run measures: --backend first, then each --compare peer (Open MPI's
// and Gloo's own algorithms, called directly).
std::vector<std::string> implementations(const CollectiveFlags& f) {
  std::vector<std::string> out = {f.backend};
  size_t start = 0;
  while (start < f.compare.size()) {
    size_t comma = f.compare.find(',', start);
    if (comma == std::string::npos) comma = f.compare.size();
    const std::string name = f.compare.substr(start, comma - start);
    start = comma + 1;
    if (name.empty()) continue;
    std::string runner;
    if (name == "mpi" || name == "mpi-direct")
      runner = "mpi-direct";
    else if (name == "gloo" || name == "gloo-direct")
      runner = "gloo-direct";
    else
      DDP_THROW(InvalidArgument, "--compare: unknown peer '", name, "' (choices: mpi, gloo)");
    if (std::find(out.begin(), out.end(), runner) != out.end()) {
      DDP_THROW(InvalidArgument, "--compare: ", runner, " is measured already");
    }
    out.push_back(runner);
  }
  return out;
}

bool needs_mpirun(const std::vector<std::string>& impls) {
  for (const auto& i : impls) {
    if (i == "mpi" || i == "mpi-direct") return true;
  }
  return false;
}

double busbw_factor(CollOp op, int n) {
  switch (op) {
    case CollOp::kAllReduce: return 2.0 * (n - 1) / n;
    case CollOp::kBroadcast:
    case CollOp::kReduce: return 1;
    case CollOp::kAllGather:
    case CollOp::kGather:
    case CollOp::kScatter:
    case CollOp::kReduceScatter:
    case CollOp::kAllToAll: return static_cast<double>(n - 1) / n;
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

BufferOptions memory_of(const CollectiveFlags& f) {
  BufferOptions m;
  if (f.memory == "group") {
    if (f.device != "cpu")
      DDP_THROW(InvalidArgument, "--memory group: host memory only (not with --device cuda)");
    m.kind = MemoryKind::kGroup;
    return m;
  }
  if (f.device == "cpu") return m;
  if (!cuda_built())
    DDP_THROW(InvalidArgument,
              "--device cuda: this ddp-bench was built without CUDA (no NCCL/CUDA found at configure)");
  if (cuda_devices() == 0) DDP_THROW(InvalidArgument, "--device cuda: no CUDA device is visible");
  m.kind = MemoryKind::kCuda;
  m.device = cuda_device_of_this_rank();
  return m;
}

void print_header(const CollectiveFlags& f) {
  if (f.format != "table") return;
  std::printf("# machine: %s\n", machine_profile().summary().c_str());
  std::printf("%-14s %-12s %-4s %5s %12s %11s %11s %11s %11s %11s %9s\n", "op", "impl", "dev", "world",
              "bytes", "median_us", "min_us", "max_us", "algbw_GBps", "busbw_GBps", "x_first");
}

// One implementation's figures for one size; `first` is the run's first implementation (the
// one the others are compared with), empty on its own row.
struct CollectiveRow {
  std::string impl;
  CollOp op = CollOp::kAllReduce;
  int world = 0;
  size_t bytes = 0;
  std::vector<double> samples_us;
  std::string first;
  double first_median_us = 0;
};

// The memory a row's implementation ran on: group memory is ours alone (Gloo's and Open MPI's
// own calls take plain host memory from it: make_runner).
bool in_group_memory(const CollectiveFlags& f, const CollectiveRow& row) {
  return f.memory == "group" && row.impl != "gloo-direct" && row.impl != "mpi-direct";
}

void print_collective_row(const CollectiveFlags& f, const CollectiveRow& row) {
  const auto& r = row.samples_us;
  const double med = median(r);
  const double lo = *std::min_element(r.begin(), r.end());
  const double hi = *std::max_element(r.begin(), r.end());
  const double algbw = med > 0 ? static_cast<double>(row.bytes) / (med * 1e-6) / 1e9 : 0;
  const double busbw = algbw * busbw_factor(row.op, row.world);
  // How many times the first implementation's time this one takes (> 1: the first is faster).
  const double x_first = row.first.empty() || row.first_median_us <= 0 ? 1.0 : med / row.first_median_us;
  if (f.format == "json") {
    nlohmann::json j = {{"op", to_string(row.op)},
                        {"backend", row.impl},
                        {"device", f.device},
                        {"memory", in_group_memory(f, row) ? "group" : "host"},
                        {"world_size", row.world},
                        {"bytes", row.bytes},
                        {"iters", f.iters},
                        {"repeats", f.repeats},
                        {"median_us", med},
                        {"min_us", lo},
                        {"max_us", hi},
                        {"samples_us", r},
                        {"algbw_GBps", algbw},
                        {"busbw_GBps", busbw},
                        {"timing", "max over ranks of per-op time, loop of iters ops"},
                        {"correct", true},
                        {"machine", machine_json()}};
    j["buffers_per_rank"] = f.buffers;
    if (!row.first.empty()) {
      j["compared_with"] = row.first;
      j["time_ratio"] = x_first;
    }
    std::printf("%s\n", j.dump().c_str());
  } else {
    std::printf("%-14s %-12s %-4s %5d %12zu %11.2f %11.2f %11.2f %11.3f %11.3f %9.2f\n", to_string(row.op),
                row.impl.c_str(), in_group_memory(f, row) ? "grp" : f.device.c_str(), row.world, row.bytes,
                med, lo, hi, algbw, busbw, x_first);
  }
  std::fflush(stdout);
}

// A wrong result somewhere (every rank knows): no row, non-zero exit. The ranks leave together,
// after every message is out (a launcher may kill the others once one rank has exited).
int refuse(CollectiveRunner& runner, const SizeResult& r) {
  if (!r.error.empty()) {
    std::fprintf(stderr, "ddp-bench collective: rank %d: WRONG RESULT: %s\n", runner.rank(), r.error.c_str());
  } else {
    std::fprintf(stderr, "ddp-bench collective: rank %d: stopping: another rank's result was wrong\n",
                 runner.rank());
  }
  std::fflush(stderr);
  try {
    runner.barrier();
  } catch (const std::exception&) {  // leaving anyway
  }
  return 1;
}

// `--op`: one op, or several comma-separated, run in order by the same ranks.
std::vector<CollOp> parse_ops(const std::string& list) {
  std::vector<CollOp> ops;
  std::string name;
  std::istringstream in(list);
  while (std::getline(in, name, ',')) ops.push_back(parse_coll_op(name));
  if (ops.empty()) DDP_THROW(InvalidArgument, "--op: no op given");
  return ops;
}

// Every implementation measures each size in turn, one repeat at a time (A B A B ...), so a
// slow minute of the machine falls on all of them alike: the ratios compare like with like.
int run_op(const CollectiveFlags& f, std::vector<std::unique_ptr<CollectiveRunner>>& runners, CollOp op,
           const TimingOptions& t) {
  const std::vector<std::string> impls = implementations(f);
  CollectiveRunner& lead = *runners.front();
  const int n = lead.size();
  for (size_t bytes : parse_sizes(f.sizes)) {
    // Per-rank count (all_to_all: per peer); the full buffer is rounded down to whole elements
    // per rank.
    const bool split = op != CollOp::kAllReduce && op != CollOp::kBroadcast && op != CollOp::kReduce;
    const size_t count = split ? bytes / sizeof(float) / n : bytes / sizeof(float);
    if (count == 0) {
      // Below one element per rank there is nothing to move (and Gloo divides by the count).
      if (lead.rank() == 0)
        std::fprintf(stderr, "ddp-bench collective: %s: %zu bytes is under one float per rank: skipped\n",
                     to_string(op), bytes);
      continue;
    }
    std::vector<CollectiveRow> rows(runners.size());
    for (int rep = 0; rep < f.repeats; ++rep) {
      // --warmup before a size's first loop; the later loops, interleaved with the peers', get
      // a few ops to warm their caches and connections again, not the whole warm-up (at 256 MiB
      // across slow links that alone took minutes).
      TimingOptions tr = t;
      if (rep > 0) tr.warmup = std::min(t.warmup, kRewarmOps);
      for (size_t i = 0; i < runners.size(); ++i) {
        const SizeResult r = measure_size(*runners[i], op, count, tr);
        if (r.wrong) return refuse(*runners[i], r);
        rows[i].samples_us.push_back(r.per_op_us.front());
      }
    }
    for (size_t i = 0; i < rows.size(); ++i) {
      rows[i].impl = impls[i];
      rows[i].op = op;
      rows[i].world = n;
      rows[i].bytes = (split ? count * n : count) * sizeof(float);
      if (i > 0) {
        rows[i].first = impls.front();
        rows[i].first_median_us = median(rows.front().samples_us);
      }
      if (lead.rank() == 0) print_collective_row(f, rows[i]);
    }
  }
  return 0;
}

// Every implementation must see the ranks --backend sees. A peer that does not (Open MPI
// started without mpirun, say under ddp-launch: each process a world of its own) would time
// nothing and print it as a figure.
void check_same_world(const std::vector<std::unique_ptr<CollectiveRunner>>& runners,
                      const std::vector<std::string>& impls) {
  const CollectiveRunner& lead = *runners.front();
  for (size_t i = 1; i < runners.size(); ++i) {
    if (runners[i]->size() == lead.size() && runners[i]->rank() == lead.rank()) continue;
    std::string how =
        impls[i] == "mpi-direct" ? " (start every rank with mpirun: ddp-bench collective -n N does)" : "";
    DDP_THROW(InvalidArgument, "--compare: ", impls[i], " sees rank ", runners[i]->rank(), " of ",
              runners[i]->size(), " where ", impls.front(), " is rank ", lead.rank(), " of ", lead.size(),
              ": it would measure another group", how);
  }
}

int run_rank(const CollectiveFlags& f) {
  TimingOptions t;
  t.warmup = f.warmup;
  t.iters = f.iters;
  t.repeats = 1;
  t.memory = memory_of(f);
  t.corrupt_rank = f.corrupt_rank;
  std::vector<std::unique_ptr<CollectiveRunner>> runners;
  for (const auto& impl : implementations(f)) {
    RunnerOptions ro;
    ro.backend = impl;
    ro.memory = t.memory;
    ro.buffers = f.buffers;
    runners.push_back(make_runner(ro));
  }
  check_same_world(runners, implementations(f));
  if (runners.front()->rank() == 0) {
    print_header(f);
    for (const auto& r : runners) {
      const std::string choices = r->choices();
      if (!choices.empty() && f.format == "table") std::printf("# %s\n", choices.c_str());
    }
  }
  settle(*runners.front());
  for (CollOp op : parse_ops(f.op)) {
    if (int rc = run_op(f, runners, op, t); rc != 0) return rc;
  }
  return 0;
}

// Tables of a local run say how far apart two CPUs were before and after it (core_round_trip.h):
// on a host that moves its vCPUs, the shared-memory figures between depend on it.
void print_round_trip(const CollectiveFlags& f, const char* when) {
  if (f.format != "table") return;
  const auto cpus = two_cpus();
  if (!cpus) return;
  const auto ns = core_round_trip_ns(*cpus);
  if (!ns) return;
  std::printf("# CPUs %d and %d, %s the run: a cache line's round trip %.0f ns\n", cpus->first, cpus->second,
              when, *ns);
  std::fflush(stdout);
}

// The subcommand's flags, parsed into `f` (their defaults: CollectiveFlags).
void add_collective_flags(CLI::App& app, CollectiveFlags& f) {
  app.add_option("--op", f.op, detail::str(kCollOpNames, " (root 0); several, comma-separated, run in turn"))
      ->capture_default_str();
  app.add_option("--backend", f.backend, "tcp, gloo, mpi, nccl, gloo-direct, mpi-direct")
      ->capture_default_str();
  app.add_option("--sizes", f.sizes, "bytes of the full buffer, comma-separated (K, M, G suffixes)")
      ->capture_default_str();
  app.add_option("--iters", f.iters, "ops per timed loop (N)")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  app.add_option("--repeats", f.repeats, "timed loops per size (R): median, min and max are printed")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  app.add_option("--warmup", f.warmup,
                 "untimed ops before each size's first timed loop (later loops: at most 2)")
      ->capture_default_str()
      ->check(CLI::NonNegativeNumber);
  app.add_option("--device", f.device,
                 "cpu (host buffers) or cuda (device buffers: nccl, or tcp/gloo staged)")
      ->capture_default_str()
      ->check(CLI::IsMember({"cpu", "cuda"}));
  app.add_option("--memory", f.memory,
                 "host (the bench's own buffers) or group: memory from the group itself "
                 "(ProcessGroup::allocate; tcp: shared memory within the host, where all_reduce, and a "
                 "hierarchical all_reduce's steps within the host, run in place); "
                 "--compare peers use host memory either way")
      ->capture_default_str()
      ->check(CLI::IsMember({"host", "group"}));
  app.add_option(
      "--compare", f.compare,
      "peers measured in the same run, interleaved repeat by repeat, each row with its time "
      "ratio to --backend: mpi (Open MPI's MPI_* calls), gloo (Gloo's own algorithms); e.g. mpi,gloo");
  app.add_option("--format", f.format, "json or table")
      ->capture_default_str()
      ->check(CLI::IsMember({"json", "table"}));
  // Hidden: the negative control of the bench's own ctest (a wrong result must be refused).
  app.add_option("--inject-wrong-result", f.corrupt_rank, "")->group("");
  app.add_option("--buffers", f.buffers,
                 "buffers per process (all_reduce, broadcast: the *_multi ops over world x K buffers; bytes "
                 "are per buffer; all_reduce's extra buffers are zeroed before each op, timed)")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  app.add_option("-n,--world-size", f.world_size, "start this many local ranks (without a launcher)")
      ->check(CLI::PositiveNumber);
  app.add_option("--bind", f.bind,
                 "with -n: auto puts each rank on a CPU of its own where there are enough (as mpirun "
                 "does for a few ranks); none lets the kernel place them (two can stay stacked on one CPU)")
      ->capture_default_str()
      ->check(CLI::IsMember({"auto", "none"}));
}

int collective_main(int argc, char** argv) {
  CLI::App app(
      "ddp-bench collective: one collective over a list of sizes; max over ranks, medians, every op checked");
  CollectiveFlags f;
  add_collective_flags(app, f);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  }
  try {
    parse_sizes(f.sizes);
    implementations(f);
    for (CollOp op : parse_ops(f.op)) {
      if (f.buffers > 1 && (!f.compare.empty() || (op != CollOp::kAllReduce && op != CollOp::kBroadcast))) {
        DDP_THROW(InvalidArgument, "--buffers: all_reduce or broadcast, without --compare");
      }
    }
    const bool has_rank = settings::get(settings::kRank) || settings::get("OMPI_COMM_WORLD_RANK") ||
                          settings::get("SLURM_PROCID");
    if (f.world_size > 0 && !has_rank) {
      LocalRanksOptions lo;
      lo.world = f.world_size;
      lo.mpirun = needs_mpirun(implementations(f));
      lo.bind = f.bind == "auto";
      lo.args.assign(argv, argv + argc);  // argv[0] is "collective"
      lo.who = "ddp-bench collective";
      print_round_trip(f, "before");
      const int status = run_local_ranks(lo);
      print_round_trip(f, "after");
      return status;
    }
    return run_rank(f);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "ddp-bench collective: %s\n", e.what());
    return 1;
  }
}

const Register kCollectiveSubcommand(
    "collective", "latency/bandwidth of one collective (all_reduce, gather, all_to_all, ...: --op)",
    collective_main);

}  // namespace
}  // namespace ddp::bench
