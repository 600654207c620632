#include "bench/core_round_trip.h"

#include <immintrin.h>
#include <pthread.h>
#include <sched.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <thread>
#include <vector>

#include "bench/bench.h"
#include "common/machine.h"

namespace ddp::bench {
namespace {

bool pin_self(int cpu) {
  cpu_set_t set;
  CPU_ZERO(&set);
  CPU_SET(cpu, &set);
  return pthread_setaffinity_np(pthread_self(), sizeof(set), &set) == 0;
}

struct alignas(64) Line {
  std::atomic<uint64_t> value{0};
};

// One loop of `rounds` round trips; nullopt when a thread could not be pinned.
std::optional<double> one_loop(std::pair<int, int> cpus, int rounds) {
  Line ping, pong;
  std::atomic<bool> pinned{true};
  std::thread echo([&] {
    if (!pin_self(cpus.second)) pinned.store(false);
    for (uint64_t i = 1; i <= static_cast<uint64_t>(rounds); ++i) {
      while (ping.value.load(std::memory_order_acquire) < i) _mm_pause();
      pong.value.store(i, std::memory_order_release);
    }
  });
  if (!pin_self(cpus.first)) pinned.store(false);
  const auto start = Clock::now();
  for (uint64_t i = 1; i <= static_cast<uint64_t>(rounds); ++i) {
    ping.value.store(i, std::memory_order_release);
    while (pong.value.load(std::memory_order_acquire) < i) _mm_pause();
  }
  const auto end = Clock::now();
  echo.join();
  if (!pinned.load()) return std::nullopt;
  return std::chrono::duration<double, std::nano>(end - start).count() / rounds;
}

}  // namespace

std::optional<std::pair<int, int>> two_cpus() {
  const std::vector<int> cpus = first_usable_cpus(2);
  if (cpus.size() < 2) return std::nullopt;
  return std::make_pair(cpus[0], cpus[1]);
}

std::optional<double> core_round_trip_ns(std::pair<int, int> cpus, int rounds, int samples) {
  // The measuring threads pin themselves; this thread's own mask is left as it was.
  std::vector<double> ns;
  std::thread runner([&] {
    for (int s = 0; s < samples; ++s) {
      const auto loop = one_loop(cpus, rounds);
      if (!loop) {
        ns.clear();
        return;
      }
      ns.push_back(*loop);
    }
  });
  runner.join();
  if (ns.empty()) return std::nullopt;
  std::sort(ns.begin(), ns.end());
  return ns[ns.size() / 2];
}

}  // namespace ddp::bench
