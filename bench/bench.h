#pragma once
// ddp-bench subcommands register themselves here: `ddp-bench <name> [flags]`.
// Each prints medians (and ratios against a peer measured in the same run); none asserts timings.
// What they share: the clock they time with, median and percentile.
#include <chrono>
#include <functional>
#include <string>
#include <vector>

namespace ddp::bench {

// The clock every figure is timed with: monotonic, and one clock for every process on the host
// (CLOCK_MONOTONIC), so times taken in forked ranks compare.
using Clock = std::chrono::steady_clock;

using Main = std::function<int(int argc, char** argv)>;  // argv[0] is the subcommand name

struct Subcommand {
  std::string name;
  std::string help;
  Main main;
};

std::vector<Subcommand>& registry();

struct Register {
  Register(std::string name, std::string help, Main main) {
    registry().push_back({std::move(name), std::move(help), std::move(main)});
  }
};

// Median of samples (copied, sorted); percentile in [0, 100].
double median(std::vector<double> samples);
double percentile(std::vector<double> samples, double p);

}  // namespace ddp::bench
