// ddp-bench shm-stages: one rank's data path of the 2-rank chunked shared-memory all_reduce
// (comm/tcp/shm_allreduce_chunked.h), stage by stage, with no peer and so no waits: stage-in
// (half a chunk into this rank's slot), copy-out (the peer's reduced half into the buffer),
// reduce (this rank's half with the peer's staged half), publish (the reduced half into the
// slot). Each stage once with glibc's memcpy and separate passes, and once as the backend runs
// it: comm::copy_bytes, and the reduce publishing into the slot in the same pass
// (comm::combine_copy: its publish column is 0). The buffer lies --offset bytes past a page
// boundary (16: where glibc's malloc puts a large, mmap'd buffer; PyTorch's 64-byte aligned
// tensors are 0 mod 64; why it matters: comm/copy_kernel.h). Prints median microseconds per op
// over --repeats.
//   ddp-bench shm-stages --sizes 1M,16M --chunks 128K,256K
#include <CLI/CLI.hpp>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <vector>

#include "bench/bench.h"
#include "bench/sizes.h"
#include "comm/copy_kernel.h"
#include "comm/reduce_kernels.h"
#include "common/machine.h"

namespace ddp::bench {
namespace {

struct ShmStagesFlags {
  std::string sizes = "1M,16M";
  std::string chunks = "128K,256K";
  int repeats = 51;
  size_t offset = 16;
};

struct Stages {
  std::vector<double> stage_in, copy_out, reduce, publish;
};

double since(Clock::time_point& t) {
  const auto now = Clock::now();
  const double us = std::chrono::duration<double, std::micro>(now - t).count();
  t = now;
  return us;
}

// One op's stages over `bytes` in chunks of `chunk` through a ring of 4 slots per rank.
void one_op(float* buf, size_t bytes, char* slots, size_t chunk, bool ours, Stages& s) {
  auto copy = [ours](void* d, const void* src, size_t n) {
    if (ours) {
      comm::copy_bytes(d, src, n);
    } else {
      std::memcpy(d, src, n);
    }
  };
  const size_t n = bytes / sizeof(float), per = chunk / sizeof(float), half = per / 2;
  double in = 0, out = 0, red = 0, pub = 0;
  for (size_t off = 0, t = 0; off < n; off += per, ++t) {
    char* mine = slots + (t % 4) * chunk;
    char* peer = slots + (4 + t % 4) * chunk;
    float* base = buf + off;
    auto at = Clock::now();
    copy(mine + half * sizeof(float), base + half, half * sizeof(float));
    in += since(at);
    copy(base + half, peer + half * sizeof(float), half * sizeof(float));
    out += since(at);
    if (ours) {  // the backend's path: the reduction publishes into the slot in the same pass
      comm::combine_copy(base, peer, mine, half, comm::DType::kFloat32, comm::ReduceOp::kSum);
      red += since(at);
    } else {
      comm::combine(base, peer, half, comm::DType::kFloat32, comm::ReduceOp::kSum);
      red += since(at);
      copy(mine, base, half * sizeof(float));
      pub += since(at);
    }
  }
  s.stage_in.push_back(in);
  s.copy_out.push_back(out);
  s.reduce.push_back(red);
  s.publish.push_back(pub);
}

int shm_stages_main(int argc, char** argv) {
  CLI::App app{"ddp-bench shm-stages: one rank's shm all_reduce data path, stage by stage"};
  ShmStagesFlags f;
  app.add_option("--sizes", f.sizes, "bytes per op, comma-separated (K, M, G)")->capture_default_str();
  app.add_option("--chunks", f.chunks, "chunk (slot) bytes, comma-separated")->capture_default_str();
  app.add_option("--repeats", f.repeats, "ops per figure (median)")->capture_default_str();
  app.add_option("--offset", f.offset, "the buffer's address past a page boundary")->capture_default_str();
  CLI11_PARSE(app, argc, argv);
  const std::vector<size_t> sizes = parse_sizes(f.sizes), chunks = parse_sizes(f.chunks, "--chunks");
  std::printf("# machine: %s\n", machine_profile().summary().c_str());
  std::printf("%10s %8s %-10s %10s %10s %10s %10s %10s\n", "bytes", "chunk", "copy", "stage_in", "copy_out",
              "reduce", "publish", "total_us");
  for (size_t bytes : sizes) {
    for (size_t chunk : chunks) {
      if (chunk < 64 || bytes % chunk != 0) continue;
      using Memory = std::unique_ptr<char, decltype(&std::free)>;
      Memory raw(static_cast<char*>(std::aligned_alloc(4096, bytes + 4096)), &std::free);
      Memory slots(static_cast<char*>(std::aligned_alloc(4096, 8 * chunk)), &std::free);
      auto* buf = reinterpret_cast<float*>(raw.get() + f.offset % 4096 / sizeof(float) * sizeof(float));
      std::memset(raw.get(), 0, bytes + 4096);
      std::memset(slots.get(), 0, 8 * chunk);
      for (bool ours : {false, true}) {
        Stages s;
        for (int r = 0; r < f.repeats; ++r) one_op(buf, bytes, slots.get(), chunk, ours, s);
        const double a = median(s.stage_in), b = median(s.copy_out), c = median(s.reduce),
                     d = median(s.publish);
        std::printf("%10zu %8zu %-10s %10.1f %10.1f %10.1f %10.1f %10.1f\n", bytes, chunk,
                    ours ? "copy_bytes" : "memcpy", a, b, c, d, a + b + c + d);
      }
    }
  }
  return 0;
}

const Register kShmStagesSubcommand(
    "shm-stages", "one rank's shm all_reduce data path, stage by stage (memcpy vs copy_bytes)",
    shm_stages_main);

}  // namespace
}  // namespace ddp::bench
