// The conformance matrix: every op x dtype x reduce op x world size in {1..5} x count in
// {0, 1, 7, 4 Ki+3}, then a reduced set at 1 Mi+5 and 16 Mi elements, each checked
// element by element against reference.h. Threads as ranks where the backend allows it; under
// mpirun the worlds are subgroups {0..n-1} of the MPI world.
#include <doctest/doctest.h>

#include <algorithm>

#include "cases.h"
#include "comm/init.h"
#include "harness.h"
#include "reference.h"
#ifdef DDP_CONFORMANCE_CUDA
#include "comm/nccl/cuda_memory.h"
#include "device_mirror.h"
#endif

using namespace ddp;
using namespace ddp::comm;
using namespace ddp::comm::conformance;

namespace {

constexpr size_t kMi = size_t{1} << 20;

// Runs cases(world) on each world size; returns every failure, prefixed by the world size.
template <typename CasesFn>
std::vector<std::string> run_worlds(const std::vector<int>& worlds, CasesFn&& cases) {
  return conformance::run_worlds(worlds, [&](ProcessGroup& g, int n) { return run_cases(g, cases(n)); });
}

bool runnable() {
  if (backend_under_test() == "nccl") return false;  // device buffers: the nccl cases below
  return threads_as_ranks() || under_mpirun();
}

void report(const std::vector<std::string>& failures) {
  for (const auto& f : failures) FAIL_CHECK(f);
  CHECK(failures.empty());
}

}  // namespace

// The oracle itself: for every reduce op and world size above 1 no single rank's input is the
// reduced result, so a backend that returns one rank's buffer (the first, the last, its own)
// cannot pass the matrix.
TEST_CASE("conformance oracle: no rank's input is the reduction (worlds 2..8)" * doctest::skip(!runnable())) {
  for (ReduceOp op : {ReduceOp::kSum, ReduceOp::kProduct, ReduceOp::kMin, ReduceOp::kMax, ReduceOp::kAvg}) {
    for (DType d : {DType::kFloat32, DType::kUInt8, DType::kInt8}) {
      for (int n = 2; n <= 8; ++n) {
        for (int r = 0; r < n; ++r) {
          bool differs = false;
          for (size_t i = 0; i < 33 && !differs; ++i)
            differs = reduced_value(d, op, n, i) != input_value(d, op, r, i);
          CAPTURE(to_string(op));
          CAPTURE(n);
          CHECK_MESSAGE(differs, "rank ", r, "'s input equals the reduction");
        }
      }
    }
  }
}

TEST_CASE("conformance: every op, dtype and reduce op at small counts, worlds 1..5" *
          doctest::skip(!runnable())) {
  INFO("backend ", backend_under_test());
  report(run_worlds({1, 2, 3, 4, 5}, [](int n) { return full_matrix(n, {0, 1, 7, 4096 + 3}); }));
}

TEST_CASE("conformance: large counts (1 Mi + 5 elements), worlds 1..5" * doctest::skip(!runnable())) {
  INFO("backend ", backend_under_test());
  report(run_worlds({1, 2, 3, 4, 5}, [](int n) { return large_matrix(n, kMi + 5); }));
}

TEST_CASE("conformance: 16 Mi elements, worlds 2 and 3" * doctest::skip(!runnable())) {
  INFO("backend ", backend_under_test());
  report(run_worlds({2, 3}, [](int) {
    return std::vector<Case>{{Op::kAllReduce, DType::kFloat32, ReduceOp::kSum, 16 * kMi, 0}};
  }));
}

// The same cases with every buffer in memory the group handed out (ProcessGroup::allocate):
// tcp on one host runs its all_reduces, reduce_scatters and all_gathers in place there
// (shm_allreduce_direct.h, shm_exchange_direct.h), and a hierarchical group the steps within
// each host of its all_reduces; every other op, and every other backend, must work on it as on
// any host memory. Under a launcher, a world of 4 too (across 2 emulated hosts x 2: hierarchical).
TEST_CASE("conformance: every op in group memory, worlds 2 and 3 (and 4 under a launcher)" *
          doctest::skip(!runnable())) {
  INFO("backend ", backend_under_test());
  const std::vector<int> worlds = under_mpirun() ? std::vector<int>{2, 3, 4} : std::vector<int>{2, 3};
  report(conformance::run_worlds(worlds, [](ProcessGroup& g, int n) {
    ArrayArena arena(g.allocate(32 * kMi));
    auto cases = full_matrix(n, {7, 4096 + 3});
    for (auto& c : large_matrix(n, kMi + 5)) cases.push_back(c);
    return run_cases(g, cases);
  }));
}

#ifdef DDP_CONFORMANCE_CUDA
namespace {

// nccl: the same cases on GPU copies of the buffers (device_mirror.h), threads as ranks, one
// GPU per rank (NCCL refuses two ranks on one device), so worlds up to the GPUs visible.
// Bitwise reductions are refused by nccl (its own tests check that), so they are left out.
std::vector<Case> without_bitwise(std::vector<Case> cases) {
  std::erase_if(cases, [](const Case& c) {
    return c.rop == ReduceOp::kBand || c.rop == ReduceOp::kBor || c.rop == ReduceOp::kBxor;
  });
  return cases;
}

// Worlds [first, last] capped at the GPUs visible (and 5).
template <typename CasesFn>
std::vector<std::string> run_nccl_worlds(int first, int last, CasesFn&& cases) {
  std::vector<std::string> failures;
  for (int n = first; n <= std::min({last, cuda::device_count(), 5}); ++n) {
    auto f = run_threads(n, [&](GroupFactory& gf) {
      auto world = gf.world();
      auto mirrored = mirror_on_device(world, cuda::default_device(world->rank()));
      return run_cases(*mirrored, without_bitwise(cases(n)));
    });
    for (auto& s : f) failures.push_back("world " + std::to_string(n) + ": " + s);
  }
  return failures;
}

}  // namespace

TEST_CASE("conformance (nccl, device buffers): every op, dtype and reduce op, world 1" *
          doctest::skip(!nccl_runnable())) {
  report(run_nccl_worlds(1, 1, [](int n) { return full_matrix(n, {0, 1, 7, 4096 + 3}); }));
}

TEST_CASE("conformance (nccl, device buffers): large counts (1 Mi + 5 elements), world 1" *
          doctest::skip(!nccl_runnable())) {
  report(run_nccl_worlds(1, 1, [](int n) { return large_matrix(n, kMi + 5); }));
}

TEST_CASE("conformance (nccl, device buffers, multi-GPU): every op, dtype and reduce op, worlds 2..GPUs" *
          doctest::skip(!nccl_multi_gpu())) {
  report(run_nccl_worlds(2, 5, [](int n) { return full_matrix(n, {0, 1, 7, 4096 + 3}); }));
}

TEST_CASE("conformance (nccl, device buffers, multi-GPU): large counts (1 Mi + 5 elements), worlds 2..GPUs" *
          doctest::skip(!nccl_multi_gpu())) {
  report(run_nccl_worlds(2, 5, [](int n) { return large_matrix(n, kMi + 5); }));
}
#endif
