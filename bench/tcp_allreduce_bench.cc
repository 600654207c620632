// ddp-bench tcp-allreduce: the tcp backend's all_reduce alone, N forked local ranks meeting
// in a FileStore. A quick tool for tuning the backend (one op at a time, after a barrier);
// `ddp-bench collective` is the side-by-side benchmark (nccl-tests' timing, with
// --backend mpi-direct / gloo-direct as the peers). Each figure is still the slowest rank's
// (a max all_reduce of every op's time, untimed), and every element of every op is checked.
//
//   ddp-bench tcp-allreduce --world-size 2 --sizes 4,1K,64K,1M,16M,64M,256M --iters 20
#include <sched.h>
#include <sys/wait.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <chrono>
#include <cstdio>

#include "bench/bench.h"
#include "bench/sizes.h"
#include "comm/tcp/tcp_process_group.h"
#include "rendezvous/file_store.h"

namespace ddp::bench {
namespace {

struct Flags {
  std::string sizes = "4,1K,64K,1M,16M,64M,256M";
  int iters = 20;
  int warmup = 3;
  int world_size = 2;
  bool barrier = true;
  bool bind = true;
};

int run_rank(const Flags& f, const std::string& path, int rank) {
  if (f.bind) {  // one core per rank, as mpirun binds its ranks: a fair side-by-side
    cpu_set_t set;
    CPU_ZERO(&set);
    CPU_SET(rank % std::max(1, static_cast<int>(::sysconf(_SC_NPROCESSORS_ONLN))), &set);
    ::sched_setaffinity(0, sizeof(set), &set);
  }
  comm::GroupSetup s;
  s.store = std::make_shared<rdzv::FileStore>(path);
  s.rank = rank;
  s.size = f.world_size;
  s.job_token = "bench";
  auto pg = comm::tcp::TcpProcessGroup::create(s);
  if (rank == 0) {
    std::printf("tcp all_reduce, %d ranks, transport %s, float32 sum, median of %d (slowest rank per op)\n",
                f.world_size, comm::tcp::to_string(pg->transport()), f.iters);
    std::printf("%12s %12s %12s %12s\n", "bytes", "median_us", "min_us", "algbw_GBps");
  }
  int wrong = 0;
  for (size_t bytes : parse_sizes(f.sizes)) {
    const size_t count = std::max<size_t>(1, bytes / sizeof(float));
    std::vector<float> buf(count, 1.f);
    std::vector<double> us;
    for (int it = 0; it < f.warmup + f.iters; ++it) {
      std::fill(buf.begin(), buf.end(), 1.f);
      if (f.barrier) pg->barrier()->wait();
      const auto t0 = std::chrono::steady_clock::now();
      pg->all_reduce(comm::view(buf.data(), buf.size()))->wait();
      const auto t1 = std::chrono::steady_clock::now();
      double dt = std::chrono::duration<double, std::micro>(t1 - t0).count();
      pg->all_reduce(comm::view(&dt, 1), {comm::ReduceOp::kMax})->wait();  // the slowest rank's time
      if (it >= f.warmup) us.push_back(dt);
      for (float x : buf) {
        if (x != static_cast<float>(f.world_size)) {
          ++wrong;
          break;
        }
      }
    }
    if (rank == 0) {
      const double med = median(us);
      std::printf("%12zu %12.1f %12.1f %12.3f\n", count * sizeof(float), med, percentile(us, 0),
                  static_cast<double>(count * sizeof(float)) / med / 1e3);
      std::fflush(stdout);
    }
  }
  if (wrong) std::fprintf(stderr, "rank %d: %d WRONG results\n", rank, wrong);
  return wrong ? 1 : 0;
}

int tcp_allreduce_main(int argc, char** argv) {
  CLI::App app{"ddp-bench tcp-allreduce: the tcp backend's all_reduce, forked local ranks"};
  Flags f;
  app.add_option("--sizes", f.sizes, "bytes, comma-separated (K, M, G suffixes)")->capture_default_str();
  app.add_option("--iters", f.iters)->capture_default_str();
  app.add_option("--warmup", f.warmup)->capture_default_str();
  app.add_option("-n,--world-size", f.world_size)->capture_default_str();
  app.add_flag("!--no-barrier", f.barrier, "do not barrier before each timed op");
  app.add_flag("!--no-bind", f.bind, "do not bind rank i to core i % cores");
  CLI11_PARSE(app, argc, argv);
  parse_sizes(f.sizes);  // refused here, once, not in every forked rank
  const std::string path = "/tmp/ddp-tcp-allreduce-" + std::to_string(::getpid());
  std::vector<pid_t> pids;
  for (int r = 0; r < f.world_size; ++r) {
    pid_t pid = ::fork();
    if (pid == 0) ::_exit(run_rank(f, path, r));
    pids.push_back(pid);
  }
  int rc = 0;
  for (pid_t pid : pids) {
    int status = 0;
    ::waitpid(pid, &status, 0);
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) rc = 1;
  }
  ::unlink(path.c_str());
  return rc;
}

Register kRegister("tcp-allreduce", "the tcp backend's all_reduce alone (tuning)", tcp_allreduce_main);

}  // namespace
}  // namespace ddp::bench
