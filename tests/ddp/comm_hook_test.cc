#include "ddp/comm_hook.h"

#include <doctest/doctest.h>

#include <cmath>

#include "common/error.h"
#include "ddp/engine.h"
#include "tests/ddp/rank_threads.h"

using namespace ddp;
using ddp::testing::run_ranks;

namespace {

// Averages 1000 values per rank through the given hook; returns rank 0's result.
std::vector<float> average_with(CommHook hook, int world) {
  std::vector<std::vector<float>> out(world);
  run_ranks(world, [&](int rank, comm::ProcessGroupPtr g) {
    const size_t n = 1000;
    std::vector<float> w(n), gw(n);
    Engine engine(g);
    engine.register_param({"w", comm::view(w.data(), n), comm::view(gw.data(), n), {}});
    if (hook) engine.register_comm_hook(hook);
    engine.finalize();
    for (size_t i = 0; i < n; ++i) gw[i] = std::sin(0.01f * i * (rank + 1)) * 3.0f + 0.001f * rank;
    engine.finish_backward();
    out[rank] = gw;
  });
  for (int r = 1; r < world; ++r) CHECK(out[r] == out[0]);
  return out[0];
}

double max_abs_diff(const std::vector<float>& a, const std::vector<float>& b) {
  double m = 0;
  for (size_t i = 0; i < a.size(); ++i) m = std::max(m, std::abs(double(a[i]) - b[i]));
  return m;
}

}  // namespace

TEST_CASE("fp16 and bf16 compression hooks stay close to the fp32 average") {
  auto exact = average_with(nullptr, 3);
  auto fp16 = average_with(fp16_compress_hook(), 3);
  auto bf16 = average_with(bf16_compress_hook(), 3);
  double e16 = max_abs_diff(exact, fp16), eb16 = max_abs_diff(exact, bf16);
  CHECK(e16 < 3e-3);   // values up to 3: half precision has ~1e-3 relative precision
  CHECK(eb16 < 3e-2);  // bfloat16: ~8e-3 relative
  CHECK(e16 > 0);      // the hook really went through 16 bits
  CHECK(eb16 > 0);
}

TEST_CASE("a user hook: bucket in, Work out (here: the sum, not the average)") {
  int calls = 0;
  CommHook sum_hook = [&](comm::ProcessGroup& g, GradBucket& b) {
    ++calls;
    CHECK(b.divisor() == doctest::Approx(2.0));
    return g.all_reduce(b.buffer, {comm::ReduceOp::kSum});
  };
  std::vector<std::vector<float>> out(2);
  run_ranks(2, [&](int rank, comm::ProcessGroupPtr g) {
    std::vector<float> w(2), gw(2);
    Engine engine(g);
    engine.register_param({"w", comm::view(w.data(), 2), comm::view(gw.data(), 2), {}});
    engine.register_comm_hook(rank == 0 ? sum_hook : CommHook([](comm::ProcessGroup& g, GradBucket& b) {
      return g.all_reduce(b.buffer, {comm::ReduceOp::kSum});
    }));
    engine.finalize();
    gw = {1.0f, float(rank)};
    engine.finish_backward();
    out[rank] = gw;
  });
  CHECK(calls == 1);
  CHECK(out[0] == std::vector<float>{2, 1});
  CHECK(out[1] == out[0]);
}

TEST_CASE("compression hooks reject integer buckets") {
  run_ranks(1, [&](int, comm::ProcessGroupPtr g) {
    std::vector<int32_t> w(2), gw(2);
    Engine engine(g);
    engine.register_param({"counts", comm::view(w.data(), 2), comm::view(gw.data(), 2), {}});
    engine.register_comm_hook(fp16_compress_hook());
    engine.finalize();
    engine.mark_ready(0);  // the hook runs on the bucket thread: its error comes from finish
    CHECK_THROWS_WITH_AS(engine.finish_backward(), doctest::Contains("needs float32 or float64"),
                         InvalidArgument);
  });
}
