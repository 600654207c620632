// ddp-bench floors: what this machine's memory allows, the yardsticks for a 2-rank all_reduce on
// one host, measured in the same minutes:
//   - copy: a memcpy of `bytes` that another CPU has just written (taking a peer's data through
//     shared memory once);
//   - pass: two threads on two CPUs, each adding its half of b into a (`a += b`, float32, the
//     backends' kernel): one reduction pass with both cores, the least a 2-rank all_reduce does;
//   - cma: the same between two processes with private buffers, through the kernel (cma_floor.h;
//     "n/a" where cross-memory attach is refused, and why), with its ratio to the pass.
// Threads are pinned to the first two CPUs this process may use (one CPU: both on it, said in
// the output). Prints medians over --repeats; never asserts a timing.
//   ddp-bench floors --sizes 1M,64M
#include <pthread.h>
#include <sched.h>

#include <CLI/CLI.hpp>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <nlohmann/json.hpp>
#include <thread>
#include <vector>

#include "bench/bench.h"
#include "bench/cma_floor.h"
#include "bench/machine_json.h"
#include "bench/sizes.h"
#include "comm/reduce_kernels.h"
#include "comm/types.h"
#include "common/error.h"
#include "common/machine.h"

namespace ddp::bench {
namespace {

struct FloorsFlags {
  std::string sizes = "1M,64M";
  int repeats = 21;
  std::string format = "table";
  std::string cma_chunk = "auto";  // the cross-process floor's chunk: auto (a quarter of L2) or bytes
};

// The first two CPUs this process may run on, or the same one twice on a single-CPU machine
// (where core_round_trip.h's two_cpus() has none): the floors are measured there too.
std::pair<int, int> floor_cpus() {
  std::vector<int> cpus = first_usable_cpus(2);
  if (cpus.empty()) cpus.push_back(0);
  return {cpus.front(), cpus.back()};
}

void pin(std::thread& t, int cpu) {
  cpu_set_t set;
  CPU_ZERO(&set);
  CPU_SET(cpu, &set);
  pthread_setaffinity_np(t.native_handle(), sizeof(set), &set);
}

double us_between(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration<double, std::micro>(b - a).count();
}

// Median microseconds of a memcpy of `bytes` that the other CPU wrote just before.
double copy_floor(size_t bytes, int repeats, std::pair<int, int> cpus) {
  std::vector<char> src(bytes), dst(bytes);
  std::atomic<int> turn{0};  // even: the writer's turn for round turn/2; odd: the copier's
  std::vector<double> samples;
  std::thread writer([&] {
    for (int r = 0; r < repeats; ++r) {
      while (turn.load(std::memory_order_acquire) != 2 * r) std::this_thread::yield();
      std::memset(src.data(), r + 1, bytes);
      turn.store(2 * r + 1, std::memory_order_release);
    }
  });
  std::thread copier([&] {
    for (int r = 0; r < repeats; ++r) {
      while (turn.load(std::memory_order_acquire) != 2 * r + 1) std::this_thread::yield();
      const auto t0 = Clock::now();
      std::memcpy(dst.data(), src.data(), bytes);
      samples.push_back(us_between(t0, Clock::now()));
      turn.store(2 * r + 2, std::memory_order_release);
    }
  });
  pin(writer, cpus.first);
  pin(copier, cpus.second);
  writer.join();
  copier.join();
  if (dst[bytes - 1] != static_cast<char>(repeats)) throw std::runtime_error("copy floor: the copy is wrong");
  return median(samples);
}

// Median microseconds of a two-thread `a += b` pass over `bytes` of float32.
double pass_floor(size_t bytes, int repeats, std::pair<int, int> cpus) {
  const size_t n = bytes / sizeof(float), half = n / 2;
  std::vector<float> a(n, 0.0F), b(n, 1.0F);
  std::atomic<int> go{0}, done{0};
  std::vector<double> samples;
  std::vector<Clock::time_point> ends(2);
  auto worker = [&](int id) {
    const size_t off = id == 0 ? 0 : half, len = id == 0 ? half : n - half;
    for (int r = 1; r <= repeats; ++r) {
      while (go.load(std::memory_order_acquire) != r) std::this_thread::yield();
      comm::combine(a.data() + off, b.data() + off, len, comm::DType::kFloat32, comm::ReduceOp::kSum);
      ends[id] = Clock::now();
      done.fetch_add(1, std::memory_order_acq_rel);
    }
  };
  std::thread t0(worker, 0), t1(worker, 1);
  pin(t0, cpus.first);
  pin(t1, cpus.second);
  for (int r = 1; r <= repeats; ++r) {
    const auto start = Clock::now();
    go.store(r, std::memory_order_release);
    while (done.load(std::memory_order_acquire) != 2 * r) std::this_thread::yield();
    samples.push_back(us_between(start, std::max(ends[0], ends[1])));
  }
  t0.join();
  t1.join();
  if (a[0] != static_cast<float>(repeats) || a[n - 1] != static_cast<float>(repeats)) {
    throw std::runtime_error("pass floor: the sums are wrong");
  }
  return median(samples);
}

struct FloorsRow {
  size_t bytes = 0;
  double copy_us = 0;
  double pass_us = 0;
  CmaFloor cma;
};

void print_floors_row(const FloorsFlags& f, const FloorsRow& r) {
  if (f.format == "json") {
    nlohmann::json j = {{"bench", "floors"},    {"bytes", r.bytes},
                        {"copy_us", r.copy_us}, {"pass_us", r.pass_us},
                        {"cma_us", nullptr},    {"cma_chunk_bytes", r.cma.chunk_bytes},
                        {"repeats", f.repeats}, {"machine", machine_json()}};
    if (!r.cma.samples_us.empty()) j["cma_us"] = median(r.cma.samples_us);
    if (!r.cma.why.empty()) j["cma_not_measured"] = r.cma.why;
    std::printf("%s\n", j.dump().c_str());
    std::fflush(stdout);
    return;
  }
  const auto gbps = [&](double us) { return static_cast<double>(r.bytes) / us / 1e3; };
  std::printf("%12zu %12.2f %12.2f ", r.bytes, r.copy_us, r.pass_us);
  if (!r.cma.samples_us.empty()) {
    const double cma_us = median(r.cma.samples_us);
    std::printf("%12.2f %10.2f %10.2f %10.2f %10.2f\n", cma_us, gbps(r.copy_us), gbps(r.pass_us),
                gbps(cma_us), cma_us / r.pass_us);
  } else {
    std::printf("%12s %10.2f %10.2f %10s %10s  (cma: %s)\n", "n/a", gbps(r.copy_us), gbps(r.pass_us), "n/a",
                "n/a", r.cma.why.c_str());
  }
  std::fflush(stdout);
}

int floors_main(int argc, char** argv) {
  CLI::App app{
      "ddp-bench floors: this machine's copy, 2-thread reduction and cross-process reduction floors, "
      "medians"};
  FloorsFlags f;
  app.add_option("--sizes", f.sizes, "bytes, comma-separated (K, M, G suffixes)")->capture_default_str();
  app.add_option("--repeats", f.repeats, "samples per figure (median)")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  app.add_option("--format", f.format, "json or table")
      ->capture_default_str()
      ->check(CLI::IsMember({"json", "table"}));
  app.add_option("--cma-chunk", f.cma_chunk,
                 "the cross-process floor's chunk: auto (a quarter of L2) or bytes (256K)")
      ->capture_default_str();
  CLI11_PARSE(app, argc, argv);
  const std::vector<size_t> sizes = parse_sizes(f.sizes);  // errors: ddp-bench's main names them
  const size_t chunk = f.cma_chunk == "auto" ? cma_chunk_bytes(machine_profile().l2_bytes)
                                             : parse_size(f.cma_chunk, "--cma-chunk");
  if (chunk < sizeof(float))
    DDP_THROW(InvalidArgument, "--cma-chunk: '", f.cma_chunk, "' is under one float");
  const auto cpus = floor_cpus();
  if (f.format == "table") {
    std::printf("# machine: %s\n", machine_profile().summary().c_str());
    std::printf("# threads on CPUs %d and %d%s\n", cpus.first, cpus.second,
                cpus.first == cpus.second ? " (one CPU: the pass is not parallel)" : "");
    std::printf("# cma: 2 processes, %zu-byte chunks%s, at most half a buffer\n", chunk,
                f.cma_chunk == "auto" ? " (a quarter of L2)" : "");
    std::printf("%12s %12s %12s %12s %10s %10s %10s %10s\n", "bytes", "copy_us", "pass_us", "cma_us",
                "copy_GBps", "pass_GBps", "cma_GBps", "cma/pass");
  }
  for (size_t bytes : sizes) {
    const size_t rounded = std::max<size_t>(bytes / 8 * 8, 8);  // two whole float halves
    FloorsRow r{rounded, copy_floor(rounded, f.repeats, cpus), pass_floor(rounded, f.repeats, cpus), {}};
    r.cma = cma_floor({.bytes = rounded, .repeats = f.repeats, .cpus = cpus, .chunk_bytes = chunk});
    print_floors_row(f, r);
  }
  return 0;
}

const Register kFloorsSubcommand(
    "floors", "this machine's copy, 2-thread a+=b and cross-process (CMA) floors (issue 14's yardsticks)",
    floors_main);

}  // namespace
}  // namespace ddp::bench
