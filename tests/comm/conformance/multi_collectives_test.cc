// The multi-buffer conformance matrix (issue 19): 1..4 buffers per rank x worlds 1..4 x every op,
// dtype and reduce op, checked element by element against multi_cases.h's exact references;
// then the agreement step: a rank whose list differs gets an error naming it, on every rank.
// nccl runs the matrix on GPU copies (device_mirror.h), buffer i of rank r on device r*K + i:
// world 1 with one buffer on one GPU; every world × K up to the GPUs visible in its own ctest.
#include <doctest/doctest.h>

#include <algorithm>

#include "common/error.h"
#include "harness.h"
#include "multi_cases.h"
#ifdef DDP_CONFORMANCE_CUDA
#include "comm/nccl/cuda_memory.h"
#include "device_mirror.h"
#endif

using namespace ddp;
using namespace ddp::comm;
using namespace ddp::comm::conformance;

namespace {

bool runnable() { return backend_under_test() != "nccl" && (threads_as_ranks() || under_mpirun()); }

void report(const std::vector<std::string>& failures) {
  for (const auto& f : failures) FAIL_CHECK(f);
  CHECK(failures.empty());
}

// A rank-dependent list: rank `odd` passes `bad` buffers/options, the others `good`; every rank
// must throw InvalidArgument naming rank `odd` and `field`, and the group must stay usable.
template <typename Op>
std::vector<std::string> expect_mismatch(ProcessGroup& g, int odd, const std::string& field, Op&& op) {
  std::vector<std::string> failures;
  const std::string who = "rank " + std::to_string(g.rank()) + ": ";
  try {
    op(g.rank() == odd)->wait();
    failures.push_back(who + "no error for a list that differs on rank " + std::to_string(odd));
  } catch (const InvalidArgument& e) {
    const std::string msg = e.what();
    if (msg.find("rank " + std::to_string(odd) + " has " + field) == std::string::npos) {
      failures.push_back(who + "the error does not name rank " + std::to_string(odd) + " and " + field +
                         ": " + msg);
    }
  }
  float x = 1;  // the group goes on: one more collective, in step on every rank
  g.all_reduce(view(&x, 1))->wait();
  if (x != static_cast<float>(g.size())) failures.push_back(who + "the group is out of step after the error");
  return failures;
}

}  // namespace

TEST_CASE("conformance oracle (multi-buffer): no virtual rank's input is the SUM or AVG (2..16)" *
          doctest::skip(!runnable())) {
  for (DType d : {DType::kFloat32, DType::kInt8, DType::kUInt8, DType::kBFloat16}) {
    for (ReduceOp op : {ReduceOp::kSum, ReduceOp::kAvg, ReduceOp::kProduct, ReduceOp::kMin, ReduceOp::kMax}) {
      for (int n = 2; n <= 16; ++n) {
        for (int v = 0; v < n; ++v) {
          bool differs = false;
          for (size_t i = 0; i < 165 && !differs; ++i)
            differs = multi_reduced(d, op, n, i) != multi_input(d, op, v, i);
          CHECK_MESSAGE(differs, to_string(d), " ", to_string(op), " n=", n, ": virtual rank ", v,
                        " is the answer");
        }
      }
    }
  }
}

TEST_CASE("conformance (multi-buffer): 1..4 buffers x worlds 1..4 x every op, dtype and reduce op" *
          doctest::skip(!runnable())) {
  INFO("backend ", backend_under_test());
  for (int k = 1; k <= 4; ++k) {
    CAPTURE(k);
    report(run_worlds({1, 2, 3, 4},
                      [k](ProcessGroup& g, int n) { return run_multi_cases(g, multi_matrix(n, k, {37})); }));
  }
}

TEST_CASE("conformance (multi-buffer): counts 0 and 1, 3 buffers, world 2" * doctest::skip(!runnable())) {
  report(run_worlds({2}, [](ProcessGroup& g, int n) {
    return run_multi_cases(g, multi_matrix(n, 3, {0, 1}));
  }));
}

TEST_CASE("conformance (multi-buffer): 64 Ki + 3 elements, 3 buffers, worlds 2 and 3" *
          doctest::skip(!runnable())) {
  report(run_worlds({2, 3}, [](ProcessGroup& g, int) {
    const size_t count = 65536 + 3;
    return run_multi_cases(g, {{MultiOp::kAllReduce, DType::kFloat32, ReduceOp::kAvg, count, 3},
                               {MultiOp::kReduce, DType::kBFloat16, ReduceOp::kSum, count, 3, 1, 2},
                               {MultiOp::kBroadcast, DType::kFloat32, ReduceOp::kSum, count, 3, 1, 1},
                               {MultiOp::kAllGather, DType::kInt32, ReduceOp::kSum, count, 3}});
  }));
}

TEST_CASE("conformance (multi-buffer): a rank whose list differs is named on every rank, world 3" *
          doctest::skip(!runnable())) {
  report(run_worlds({3}, [](ProcessGroup& g, int) {
    std::vector<float> a(12, 1.0f);
    std::vector<double> d(8, 1.0);
    std::vector<Buffer> two{view(a.data(), 4), view(a.data() + 4, 4)};
    std::vector<Buffer> three{view(a.data(), 4), view(a.data() + 4, 4), view(a.data() + 8, 4)};
    std::vector<Buffer> shorter{view(a.data(), 3), view(a.data() + 4, 3)};
    std::vector<Buffer> doubles{view(d.data(), 4), view(d.data() + 4, 4)};
    std::vector<std::string> f;
    auto add = [&](std::vector<std::string> more) { f.insert(f.end(), more.begin(), more.end()); };
    add(expect_mismatch(g, 2, "list length 3",
                        [&](bool odd) { return g.all_reduce_multi(odd ? three : two); }));
    add(expect_mismatch(g, 1, "count 3", [&](bool odd) { return g.broadcast_multi(odd ? shorter : two); }));
    add(expect_mismatch(g, 2, "dtype float64",
                        [&](bool odd) { return g.reduce_multi(odd ? doubles : two); }));
    add(expect_mismatch(g, 1, "root index 1", [&](bool odd) {
      return g.broadcast_multi(two, {.root = 0, .root_index = odd ? 1 : 0});
    }));
    add(expect_mismatch(g, 2, "reduce op max", [&](bool odd) {
      return g.all_reduce_multi(two, {odd ? ReduceOp::kMax : ReduceOp::kSum});
    }));
    return f;
  }));
}

#ifdef DDP_CONFORMANCE_CUDA
namespace {

// nccl: the same matrix on GPU copies (device_mirror.h), threads as ranks: buffer i of rank r on
// device r*K + i, so world × K is at most the GPUs visible. NCCL has no bitwise reductions, and
// its AVG on floating types multiplies each input by 1/(world × K) before summing, which rounds
// differently from the exact mean unless world × K is a power of two: those cases stay out.
std::vector<MultiCase> nccl_cases(int n, int k, const std::vector<size_t>& counts) {
  const int v = n * k;
  const bool exact_avg = (v & (v - 1)) == 0;
  std::vector<MultiCase> cases = multi_matrix(n, k, counts);
  std::erase_if(cases, [&](const MultiCase& c) {
    return is_bitwise(c.rop) || (c.rop == ReduceOp::kAvg && !is_integer(c.dtype) && !exact_avg);
  });
  return cases;
}

// Every (world, K) with world × K <= GPUs (world <= 4, K <= 4) for which keep(world, K) holds.
template <typename Keep>
std::vector<std::string> run_nccl_lists(Keep&& keep, const std::vector<size_t>& counts) {
  std::vector<std::string> failures;
  const int gpus = cuda::device_count();
  for (int k = 1; k <= std::min(gpus, 4); ++k) {
    for (int n = 1; n <= std::min(gpus / k, 4); ++n) {
      if (!keep(n, k)) continue;
      auto f = run_threads(n, [&](GroupFactory& gf) {
        auto world = gf.world();
        auto mirrored = mirror_on_device(world, cuda::default_device(world->rank()));
        return run_multi_cases(*mirrored, nccl_cases(n, k, counts));
      });
      for (auto& s : f)
        failures.push_back("world " + std::to_string(n) + ", K " + std::to_string(k) + ": " + s);
    }
  }
  return failures;
}

}  // namespace

TEST_CASE("conformance (multi-buffer, nccl, device buffers): one buffer, world 1" *
          doctest::skip(!nccl_runnable())) {
  report(run_nccl_lists([](int n, int k) { return n == 1 && k == 1; }, {0, 1, 37}));
}

TEST_CASE("conformance (multi-buffer, nccl, device buffers, multi-GPU): K x worlds with world x K <= GPUs" *
          doctest::skip(!nccl_multi_gpu())) {
  report(run_nccl_lists([](int n, int k) { return n * k > 1; }, {0, 1, 37, 65536 + 3}));
}
#endif
