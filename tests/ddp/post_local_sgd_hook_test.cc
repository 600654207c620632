#include "ddp/post_local_sgd_hook.h"

#include <doctest/doctest.h>

#include <memory>
#include <vector>

#include "common/error.h"
#include "ddp/engine.h"
#include "tests/ddp/rank_threads.h"

using namespace ddp;
using ddp::testing::run_ranks;

TEST_CASE("post_local_sgd_hook: averaged for the warm-up, then local or over the subgroup") {
  for (const bool with_subgroup : {false, true}) {
    CAPTURE(with_subgroup);
    std::vector<std::vector<std::vector<float>>> out(2);
    run_ranks(2, [&](int rank, comm::ProcessGroupPtr g) {
      std::vector<float> w(3), gw(3);
      Engine engine(g);
      engine.register_param({"w", comm::view(w.data(), 3), comm::view(gw.data(), 3), {}});
      auto state = std::make_shared<PostLocalSGDState>(PostLocalSGDOptions{2, with_subgroup ? g : nullptr});
      engine.register_comm_hook(post_local_sgd_hook(state));
      engine.finalize();
      for (int s = 0; s < 4; ++s) {
        gw = {1.0f + rank, 2.0f * rank, 4.0f};
        engine.finish_backward();
        out[rank].push_back(gw);
      }
      CHECK(state->iteration() == 2);  // counts the warm-up only
    });
    const std::vector<float> avg{1.5f, 1.0f, 4.0f};
    for (int r = 0; r < 2; ++r) {
      CHECK(out[r][0] == avg);
      CHECK(out[r][1] == avg);
      for (int s = 2; s < 4; ++s) {
        CHECK(out[r][s] == (with_subgroup ? avg : std::vector<float>{1.0f + r, 2.0f * r, 4.0f}));
      }
    }
  }
}
