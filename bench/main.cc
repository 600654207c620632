// ddp-bench: one binary, one subcommand per measured component (store, collective, ddp, ...).
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <exception>
#include <filesystem>
#include <new>
#include <string>
#include <vector>

#include "bench/bench.h"

namespace ddp::bench {

std::vector<Subcommand>& registry() {
  static std::vector<Subcommand> r;
  return r;
}

double percentile(std::vector<double> samples, double p) {
  if (samples.empty()) return 0;
  std::sort(samples.begin(), samples.end());
  double pos = p / 100.0 * static_cast<double>(samples.size() - 1);
  size_t lo = static_cast<size_t>(pos);
  size_t hi = std::min(lo + 1, samples.size() - 1);
  return samples[lo] + (samples[hi] - samples[lo]) * (pos - static_cast<double>(lo));
}

double median(std::vector<double> samples) { return percentile(std::move(samples), 50); }

#ifdef DDP_BENCH_TORCH_EXE
namespace {

// `ddp-bench torch|hooks ...` runs `ddp-bench-torch torch|hooks ...` from this program's folder (see
// bench/CMakeLists.txt: only that program loads LibTorch).
int exec_torch_bench(int argc, char** argv) {
  std::error_code ec;
  const auto self = std::filesystem::read_symlink("/proc/self/exe", ec);
  const std::string path = (ec ? std::filesystem::path(".") : self.parent_path()) / DDP_BENCH_TORCH_EXE;
  std::vector<char*> args = {const_cast<char*>(path.c_str())};
  args.insert(args.end(), argv, argv + argc);
  args.push_back(nullptr);
  ::execv(path.c_str(), args.data());
  std::fprintf(stderr, "ddp-bench %s: cannot run %s: %s\n", argv[0], path.c_str(), std::strerror(errno));
  return 1;
}

Register torch_exec("torch", "LibTorch DDP step vs PyTorch DDP (6x Linear(2048) MLP, interleaved)",
                    exec_torch_bench);
Register hooks_exec("hooks",
                    "LibTorch DDP step time and bytes per step per comm hook; ZeRO's state (ddp-launch)",
                    exec_torch_bench);

}  // namespace
#endif

}  // namespace ddp::bench

static void usage(FILE* out) {
  std::fprintf(out,
               "usage: ddp-bench <subcommand> [options]   (ddp-bench <subcommand> --help)\n\nsubcommands:\n");
  auto subs = ddp::bench::registry();
  std::sort(subs.begin(), subs.end(), [](auto& a, auto& b) { return a.name < b.name; });
  for (const auto& s : subs) std::fprintf(out, "  %-12s %s\n", s.name.c_str(), s.help.c_str());
}

int main(int argc, char** argv) {
  if (argc < 2 || !std::strcmp(argv[1], "--help") || !std::strcmp(argv[1], "-h")) {
    usage(argc < 2 ? stderr : stdout);
    return argc < 2 ? 2 : 0;
  }
  for (const auto& s : ddp::bench::registry()) {
    if (s.name != argv[1]) continue;
    // A subcommand's error (a bad --sizes item, a buffer that cannot be allocated) ends it here,
    // named, instead of in std::terminate.
    try {
      return s.main(argc - 1, argv + 1);
    } catch (const std::bad_alloc&) {
      std::fprintf(stderr, "ddp-bench %s: out of memory (are --sizes too large for this machine?)\n",
                   argv[1]);
    } catch (const std::exception& e) {
      std::fprintf(stderr, "ddp-bench %s: %s\n", argv[1], e.what());
    }
    return 1;
  }
  std::fprintf(stderr, "ddp-bench: unknown subcommand '%s'\n\n", argv[1]);
  usage(stderr);
  return 2;
}
