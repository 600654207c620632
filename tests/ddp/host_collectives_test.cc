// The engine's bookkeeping collectives on host values: directly on host backends (threads as
// ranks), and staged through the GPU for nccl (world of one). The nccl case has its own ctest
// (ddp_host_collectives_test_nccl_staged) that reports Skipped without nccl or a GPU.
#include "ddp/host_collectives.h"

#include <doctest/doctest.h>

#include <vector>

#include "ddp/cuda_ops.h"
#include "rank_threads.h"

using namespace ddp;
using ddp::comm::view;

namespace {

// Runs all three on `group` and checks the results against what rank r must see.
void check_all_three(comm::ProcessGroup& group) {
  const int n = group.size(), r = group.rank();
  std::vector<int32_t> votes{1, r};
  all_reduce_host(group, view(votes.data(), votes.size()), comm::ReduceOp::kSum);
  CHECK(votes == std::vector<int32_t>{n, n * (n - 1) / 2});
  int64_t mine = 100 + r;
  std::vector<int64_t> all(n, -1);
  all_gather_host(group, view(&mine, 1), view(all.data(), all.size()));
  for (int i = 0; i < n; ++i) CHECK(all[i] == 100 + i);
  std::vector<int64_t> msg{r == 0 ? 7 : 0, r == 0 ? 8 : 0};
  broadcast_host(group, view(msg.data(), msg.size()), 0);
  CHECK(msg == std::vector<int64_t>{7, 8});
}

bool nccl_with_gpu() {
  bool built = false;
  for (const auto& b : comm::available_backends()) built |= b == "nccl";
  return built && cuda::device_count() > 0;
}

}  // namespace

TEST_CASE("host groups take the host views directly (threads as ranks, worlds 1..3)") {
  for (int world = 1; world <= 3; ++world) {
    CAPTURE(world);
    testing::run_ranks(world, [](int, comm::ProcessGroupPtr group) {
      CHECK_FALSE(group->buffer_device().is_cuda());
      check_all_three(*group);
    });
  }
}

TEST_CASE("an nccl group gets the values staged through its GPU" * doctest::skip(!nccl_with_gpu())) {
  comm::GroupSetup setup;
  setup.store = std::make_shared<rdzv::HashStore>(Millis(60'000));
  setup.global_ranks = {0};
  auto group = comm::create_group("nccl", setup);
  CHECK(group->buffer_device().is_cuda());
  check_all_three(*group);
}
