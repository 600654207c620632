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

// The oracle itself (tests/comm/reduction_inputs.h): at every world 2..8 and at the counts and
// offsets the matrix runs (reduce_scatter's blocks start at rank x count), no rank's buffer is the
// MIN or the MAX, SUM, PRODUCT and AVG are no rank's value at any element, and no op's result is
// another's. (Every reduction case runs this check for its own world and count too.)
TEST_CASE("conformance oracle: the reference passes its self-check at worlds 2..8 and the matrix's counts" *
          doctest::skip(!runnable())) {
  constexpr DType kAll[] = {DType::kFloat32, DType::kFloat64, DType::kFloat16, DType::kBFloat16,
                            DType::kInt8,    DType::kUInt8,   DType::kInt32,   DType::kInt64};
  for (DType d : kAll) {
    for (int n = 2; n <= 8; ++n) {
      for (size_t count : {size_t{1}, size_t{7}, size_t{4096 + 3}, kMi + 5}) {
        for (int r = 0; r < n; ++r) {
          for (ReduceOp op :
               {ReduceOp::kSum, ReduceOp::kProduct, ReduceOp::kMin, ReduceOp::kMax, ReduceOp::kAvg}) {
            const std::string f = oracle_failure(d, op, n, static_cast<size_t>(r) * count, count);
            CHECK_MESSAGE(f.empty(), f);
          }
        }
      }
    }
  }
}

namespace {

// A backend whose all_reduce is wrong in one plausible way: every rank keeps its own buffer,
// every rank gets rank `from`'s, or the ops are another reduce op. Everything else is `inner`'s.
class WrongAllReduce final : public ProcessGroup {
 public:
  enum class Mode { kOwnBuffer, kOneRanksBuffer, kOtherOp };
  WrongAllReduce(ProcessGroup& inner, Mode mode, int from = 0)
      : ProcessGroup(inner.rank(), inner.size(), Options{inner.timeout()}),
        inner_(inner),
        mode_(mode),
        from_(from) {}
  std::string backend_name() const override { return inner_.backend_name(); }

 protected:
  WorkPtr do_all_reduce(Buffer buf, AllReduceOptions o) override {
    if (mode_ == Mode::kOwnBuffer) return inner_.barrier();
    if (mode_ == Mode::kOneRanksBuffer) return inner_.broadcast(buf, {from_});
    // SUM done as AVG, PRODUCT as SUM, MIN as MAX, MAX as MIN, AVG as SUM.
    constexpr ReduceOp kOther[] = {ReduceOp::kAvg, ReduceOp::kSum, ReduceOp::kMax, ReduceOp::kMin,
                                   ReduceOp::kSum};
    o.op = kOther[static_cast<size_t>(o.op)];
    return inner_.all_reduce(buf, o);
  }
  WorkPtr do_send(Buffer b, int dst, SendOptions o) override { return inner_.send(b, dst, o); }
  WorkPtr do_recv(Buffer b, int src, RecvOptions o) override { return inner_.recv(b, src, o); }
  WorkPtr do_broadcast(Buffer b, BroadcastOptions o) override { return inner_.broadcast(b, o); }
  WorkPtr do_reduce(Buffer b, ReduceOptions o) override { return inner_.reduce(b, o); }
  WorkPtr do_all_gather(Buffer in, Buffer out, AllGatherOptions o) override {
    return inner_.all_gather(in, out, o);
  }
  WorkPtr do_gather(Buffer in, Buffer out, GatherOptions o) override { return inner_.gather(in, out, o); }
  WorkPtr do_scatter(Buffer in, Buffer out, ScatterOptions o) override { return inner_.scatter(in, out, o); }
  WorkPtr do_reduce_scatter(Buffer in, Buffer out, ReduceScatterOptions o) override {
    return inner_.reduce_scatter(in, out, o);
  }
  WorkPtr do_all_to_all(Buffer in, Buffer out, AllToAllOptions o) override {
    return inner_.all_to_all(in, out, o);
  }
  WorkPtr do_barrier(BarrierOptions o) override { return inner_.barrier(o); }
  void do_abort(const std::string& reason) override { inner_.abort(reason); }

 private:
  ProcessGroup& inner_;
  Mode mode_;
  int from_;
};

// The arithmetic all_reduce cases at counts 2 and 7 that `wrong` passes on this rank (none may).
std::vector<std::string> passing_cases(ProcessGroup& wrong) {
  std::vector<std::string> passed;
  for (DType d :
       {DType::kFloat32, DType::kFloat16, DType::kBFloat16, DType::kInt8, DType::kUInt8, DType::kInt64}) {
    for (ReduceOp op : {ReduceOp::kSum, ReduceOp::kProduct, ReduceOp::kMin, ReduceOp::kMax, ReduceOp::kAvg}) {
      for (size_t count : {size_t{2}, size_t{7}}) {
        const Case c{Op::kAllReduce, d, op, count, 0};
        Array a(d, count);  // check_all_reduce's steps, without the self-check: the comparison must catch it
        fill_input(a, op, wrong.rank());
        wrong.all_reduce(a.buffer(), {op})->wait();
        auto want = [&](size_t i) { return reduced_value(d, op, wrong.size(), i); };
        if (compare(a, 0, count, want, c.name()).empty())
          passed.push_back("rank " + std::to_string(wrong.rank()) + ": " + c.name());
      }
    }
  }
  return passed;
}

}  // namespace

// The negative control: backends that return one rank's buffer (each its own, or one rank's to
// all) or reduce with another op must fail every reduction case of the matrix's kind, at worlds
// 2 and 3.
TEST_CASE("conformance negative control: an all_reduce that returns one rank's buffer or another op fails" *
          doctest::skip(!runnable())) {
  INFO("backend ", backend_under_test());
  report(conformance::run_worlds({2, 3}, [](ProcessGroup& g, int n) {
    std::vector<std::string> passed;
    auto add = [&](const std::string& how, std::vector<std::string> p) {
      for (auto& s : p) passed.push_back(how + " passes " + s);
    };
    WrongAllReduce own(g, WrongAllReduce::Mode::kOwnBuffer);
    add("each rank's own buffer", passing_cases(own));
    for (int from = 0; from < n; ++from) {
      WrongAllReduce one(g, WrongAllReduce::Mode::kOneRanksBuffer, from);
      add("rank " + std::to_string(from) + "'s buffer", passing_cases(one));
    }
    WrongAllReduce other(g, WrongAllReduce::Mode::kOtherOp);
    add("another op", passing_cases(other));
    return passed;
  }));
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
