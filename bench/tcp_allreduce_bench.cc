// ddp-bench tcp-allreduce: the tcp backend's all_reduce alone, N forked local ranks meeting
// in a FileStore. A quick tool for tuning the backend (one op at a time, after a barrier);
// `ddp-bench collective` is the side-by-side benchmark (nccl-tests' timing, with
// --backend mpi-direct / gloo-direct as the peers). Each figure is still the slowest rank's
// (a max all_reduce of every op's time, untimed), and every element of every op is checked.
//
//   ddp-bench tcp-allreduce --world-size 2 --sizes 4,1K,64K,1M,16M,64M,256M --iters 20
//   ddp-bench tcp-allreduce --dtype bfloat16   (the reduce kernels of another element type)
#include <sched.h>
#include <sys/wait.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <vector>

#include "bench/bench.h"
#include "bench/sizes.h"
#include "comm/tcp/tcp_process_group.h"
#include "rendezvous/file_store.h"

namespace ddp::bench {
namespace {

struct TcpAllreduceFlags {
  std::string sizes = "4,1K,64K,1M,16M,64M,256M";
  std::string dtype = "float32";
  int iters = 20;
  int warmup = 3;
  int world_size = 2;
  bool barrier = true;
  bool bind = true;
};

// The bytes of `v` as one element of `dtype`.
std::vector<unsigned char> element_bytes(comm::DType dtype, double v) {
  std::vector<unsigned char> out(comm::dtype_size(dtype));
  auto put = [&](auto x) { std::memcpy(out.data(), &x, sizeof x); };
  switch (dtype) {
    case comm::DType::kFloat32: put(static_cast<float>(v)); break;
    case comm::DType::kFloat64: put(v); break;
    case comm::DType::kFloat16: put(comm::float_to_half(static_cast<float>(v))); break;
    case comm::DType::kBFloat16: put(comm::float_to_bfloat16(static_cast<float>(v))); break;
    case comm::DType::kInt8: put(static_cast<int8_t>(v)); break;
    case comm::DType::kUInt8: put(static_cast<uint8_t>(v)); break;
    case comm::DType::kInt32: put(static_cast<int32_t>(v)); break;
    case comm::DType::kInt64: put(static_cast<int64_t>(v)); break;
  }
  return out;
}

// `element` n times over.
std::vector<unsigned char> repeated(const std::vector<unsigned char>& element, size_t n) {
  std::vector<unsigned char> out(element.size() * n);
  for (size_t i = 0; i < n; ++i) std::memcpy(&out[i * element.size()], element.data(), element.size());
  return out;
}

int run_forked_rank(const TcpAllreduceFlags& f, const std::string& path, int rank) {
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
    std::printf("tcp all_reduce, %d ranks, transport %s, %s sum, median of %d (slowest rank per op)\n",
                f.world_size, comm::tcp::to_string(pg->transport()), f.dtype.c_str(), f.iters);
    std::printf("%12s %12s %12s %12s\n", "bytes", "median_us", "min_us", "algbw_GBps");
  }
  int wrong = 0;
  const comm::DType dtype = comm::parse_dtype(f.dtype);
  const size_t es = comm::dtype_size(dtype);
  // Every element 1 on every rank: the sum is the world size, exact in every dtype here (int8:
  // up to 127 ranks).
  const std::vector<unsigned char> one = element_bytes(dtype, 1.0);
  const std::vector<unsigned char> want = element_bytes(dtype, f.world_size);
  for (size_t bytes : parse_sizes(f.sizes)) {
    const size_t count = std::max<size_t>(1, bytes / es);
    const std::vector<unsigned char> ones = repeated(one, count), sums = repeated(want, count);
    std::vector<unsigned char> buf(count * es);
    std::vector<double> us;
    for (int it = 0; it < f.warmup + f.iters; ++it) {
      std::memcpy(buf.data(), ones.data(), buf.size());
      if (f.barrier) pg->barrier()->wait();
      const auto t0 = std::chrono::steady_clock::now();
      pg->all_reduce(comm::Buffer{buf.data(), count, dtype, comm::Device{}})->wait();
      const auto t1 = std::chrono::steady_clock::now();
      double dt = std::chrono::duration<double, std::micro>(t1 - t0).count();
      pg->all_reduce(comm::view(&dt, 1), {comm::ReduceOp::kMax})->wait();  // the slowest rank's time
      if (it >= f.warmup) us.push_back(dt);
      if (std::memcmp(buf.data(), sums.data(), buf.size()) != 0) ++wrong;
    }
    if (rank == 0) {
      const double med = median(us);
      std::printf("%12zu %12.1f %12.1f %12.3f\n", count * es, med, percentile(us, 0),
                  static_cast<double>(count * es) / med / 1e3);
      std::fflush(stdout);
    }
  }
  if (wrong) std::fprintf(stderr, "rank %d: %d WRONG results\n", rank, wrong);
  return wrong ? 1 : 0;
}

int tcp_allreduce_main(int argc, char** argv) {
  CLI::App app{"ddp-bench tcp-allreduce: the tcp backend's all_reduce, forked local ranks"};
  TcpAllreduceFlags f;
  app.add_option("--sizes", f.sizes, "bytes, comma-separated (K, M, G suffixes)")->capture_default_str();
  app.add_option("--dtype", f.dtype,
                 "element type: float32, float64, float16, bfloat16, int8, uint8, int32, int64")
      ->capture_default_str();
  app.add_option("--iters", f.iters)->capture_default_str();
  app.add_option("--warmup", f.warmup)->capture_default_str();
  app.add_option("-n,--world-size", f.world_size)->capture_default_str();
  app.add_flag("!--no-barrier", f.barrier, "do not barrier before each timed op");
  app.add_flag("!--no-bind", f.bind, "do not bind rank i to core i % cores");
  CLI11_PARSE(app, argc, argv);
  parse_sizes(f.sizes);  // refused here, once, not in every forked rank
  comm::parse_dtype(f.dtype);
  const std::string path = "/tmp/ddp-tcp-allreduce-" + std::to_string(::getpid());
  std::vector<pid_t> pids;
  for (int r = 0; r < f.world_size; ++r) {
    pid_t pid = ::fork();
    if (pid == 0) ::_exit(run_forked_rank(f, path, r));
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

const Register kTcpAllreduceSubcommand("tcp-allreduce", "the tcp backend's all_reduce alone (tuning)",
                                       tcp_allreduce_main);

}  // namespace
}  // namespace ddp::bench
