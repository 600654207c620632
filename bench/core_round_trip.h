#pragma once
// How far apart two CPUs are, as the time a cache line takes to go from one to the other and
// back: two threads pinned to them hand a counter back and forth. On a VM the host may move the
// vCPUs under a running job (bench/results/history.md, "Near cores and far cores"), and
// shared-memory figures follow it, so ddp-bench collective prints it before and after a local run.
#include <optional>
#include <utility>

namespace ddp::bench {

// The first two CPUs this process may run on; nullopt with fewer than two.
std::optional<std::pair<int, int>> two_cpus();

// Median nanoseconds of a round trip between the two CPUs over `samples` loops of `rounds`;
// nullopt when a thread could not be pinned.
std::optional<double> core_round_trip_ns(std::pair<int, int> cpus, int rounds = 20000, int samples = 5);

}  // namespace ddp::bench
