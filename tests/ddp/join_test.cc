// Join with uneven inputs, threads as ranks: no hang, gradients averaged over the ranks that
// contributed (or the initial world size), final parameters identical everywhere.
#include "ddp/join.h"

#include <doctest/doctest.h>

#include "common/error.h"
#include "ddp/engine.h"
#include "tests/ddp/rank_threads.h"

using namespace ddp;
using ddp::testing::run_ranks;

namespace {

struct Outcome {
  std::vector<std::vector<float>> grads;  // per iteration, this rank's averaged gradient
  std::vector<float> final_weights;
  std::vector<float> final_buffer;
};

// Rank r trains on r + 1 batches (uneven). The gradient of rank r is {r + 1, 1}; the
// "optimizer" adds the gradient to the weights. Buckets split so several collectives shadow.
std::vector<Outcome> run_uneven(int world, JoinOptions join_options, bool find_unused = false) {
  std::vector<Outcome> out(world);
  run_ranks(world, [&](int rank, comm::ProcessGroupPtr g) {
    std::vector<float> w(2, 0.0f), gw(2), b(2, 0.0f), gb(2), stats(1, float(100 + rank));
    EngineOptions o;
    o.first_bucket_cap_mb = 4.0 / (1 << 20);
    o.bucket_cap_mb = 4.0 / (1 << 20);
    o.find_unused_parameters = find_unused;
    Engine engine(g, o);
    engine.register_param({"w", comm::view(w.data(), 2), comm::view(gw.data(), 2), {}});
    engine.register_param({"b", comm::view(b.data(), 2), comm::view(gb.data(), 2), {}});
    engine.register_buffer({"stats", comm::view(stats.data(), 1), {}});
    engine.finalize();
    {
      Join join(engine, join_options);
      for (int it = 0; it <= rank; ++it) {
        engine.pre_forward();
        stats[0] += 1;  // what a batch-norm would do; rank 0's (or the lowest active) wins
        gw = {float(rank + 1), 1.0f};
        gb = {1.0f, float(it)};
        engine.mark_ready(0);
        engine.mark_ready(1);
        engine.finish_backward();
        out[rank].grads.push_back(gw);
        for (int i = 0; i < 2; ++i) {
          w[i] += gw[i];
          b[i] += gb[i];
        }
      }
      join.join();
    }
    out[rank].final_weights = {w[0], w[1], b[0], b[1]};
    out[rank].final_buffer = stats;
  });
  return out;
}

}  // namespace

TEST_CASE("join: uneven inputs finish without a hang; averages over the contributing ranks") {
  for (int world : {2, 3, 4}) {
    CAPTURE(world);
    auto out = run_uneven(world, {.divide_by_initial_world_size = false});
    // Iteration i: ranks i..world-1 are active; average of their (r+1) values.
    const auto& last = out[world - 1];
    REQUIRE(last.grads.size() == static_cast<size_t>(world));
    for (int it = 0; it < world; ++it) {
      double sum = 0;
      for (int r = it; r < world; ++r) sum += r + 1;
      CHECK(last.grads[it][0] == doctest::Approx(sum / (world - it)));
      CHECK(last.grads[it][1] == doctest::Approx(1.0));
    }
    for (int r = 0; r < world; ++r) {
      CHECK(out[r].grads.size() == static_cast<size_t>(r + 1));
      CHECK(out[r].final_weights == last.final_weights);  // synced from the last joiner
      CHECK(out[r].final_buffer == last.final_buffer);
    }
  }
}

TEST_CASE("join: dividing by the initial world size") {
  const int world = 3;
  auto out = run_uneven(world, {.divide_by_initial_world_size = true});
  const auto& last = out[world - 1];
  for (int it = 0; it < world; ++it) {
    double sum = 0;
    for (int r = it; r < world; ++r) sum += r + 1;
    CHECK(last.grads[it][0] == doctest::Approx(sum / world));
    CHECK(last.grads[it][1] == doctest::Approx((world - it) / double(world)));
  }
}

TEST_CASE("join: the buffer comes from the lowest active rank") {
  auto out = run_uneven(2, {.divide_by_initial_world_size = false}, /*find_unused=*/true);
  // Iteration 0: rank 0 (100) broadcasts, both add 1 -> 101. Iteration 1: rank 1 is the only
  // active rank and broadcasts its own 101 -> 102. Final sync from rank 1.
  CHECK(out[0].final_buffer == std::vector<float>{102});
  CHECK(out[1].final_buffer == std::vector<float>{102});
}

TEST_CASE("join: forgetting pre_forward under a Join is an error, not a hang") {
  run_ranks(1, [&](int, comm::ProcessGroupPtr g) {
    std::vector<float> w(1), gw(1);
    Engine engine(g);
    engine.register_param({"w", comm::view(w.data(), 1), comm::view(gw.data(), 1), {}});
    engine.finalize();
    Join join(engine);
    CHECK_THROWS_AS(engine.finish_backward(), InvalidArgument);
    join.join();
    CHECK_THROWS_AS(join.join(), InvalidArgument);
  });
}
