// The nccl backend on a real GPU (skipped without one). One GPU: world size 1 and the
// rendezvous timeout; two or more: threads as ranks, one device each.
#include <doctest/doctest.h>

#include <future>
#include <thread>
#include <vector>

#include "comm/backend.h"
#include "comm/group_setup.h"
#include "comm/nccl/cuda_memory.h"
#include "comm/nccl/device_vector.h"
#include "comm/nccl/gpu.h"
#include "common/error.h"
#include "rendezvous/hash_store.h"

using namespace ddp;
using namespace ddp::comm;
using ddp::test::has_gpu;

namespace {

using DeviceArray = test::DeviceVector<float>;

bool two_gpus() { return has_gpu() && cuda::device_count() >= 2; }

}  // namespace

TEST_CASE("nccl, world size 1: every op on device buffers; AVG; order" * doctest::skip(!has_gpu())) {
  auto pg = make_nccl_group(test::setup_for(std::make_shared<rdzv::HashStore>(), 0, 1));
  const int dev = cuda::default_device(0);
  DeviceArray a({1, 2, 3, 4}, dev), out({0, 0, 0, 0}, dev);
  pg->all_reduce(a.view(), {ReduceOp::kAvg})->wait();
  CHECK(a.host() == std::vector<float>{1, 2, 3, 4});
  pg->broadcast(a.view(), {0})->wait();
  pg->reduce(a.view(), {0, ReduceOp::kMax})->wait();
  pg->all_gather(a.view(), out.view())->wait();
  CHECK(out.host() == std::vector<float>{1, 2, 3, 4});
  pg->all_to_all(a.view(), out.view())->wait();
  pg->gather(a.view(), out.view(), {0})->wait();
  pg->scatter(a.view(), out.view(), {0})->wait();
  pg->reduce_scatter(a.view(), out.view())->wait();
  CHECK(out.host() == std::vector<float>{1, 2, 3, 4});
  std::vector<WorkPtr> works;
  for (int i = 0; i < 10; ++i) works.push_back(pg->all_reduce(a.view()));
  works.push_back(pg->barrier());
  wait_all(works);
  CHECK(works.back()->is_success());
}

TEST_CASE("nccl: bitwise ops, host buffers and wrong devices are InvalidArgument" *
          doctest::skip(!has_gpu())) {
  auto pg = make_nccl_group(test::setup_for(std::make_shared<rdzv::HashStore>(), 0, 1));
  const int dev = cuda::default_device(0);
  auto mem = cuda::device_alloc(64, dev);
  Buffer ints = cuda::device_view(mem.get(), 4, DType::kInt32, dev);
  CHECK_THROWS_AS(pg->all_reduce(ints, {ReduceOp::kBxor}), InvalidArgument);
  std::vector<float> host(4);
  CHECK_THROWS_AS(pg->all_reduce(view(host.data(), 4)), InvalidArgument);
  Buffer elsewhere = cuda::device_view(mem.get(), 4, DType::kFloat32, dev + 1);
  CHECK_THROWS_AS(pg->all_reduce(elsewhere), InvalidArgument);
  CHECK(pg->all_reduce(cuda::device_view(mem.get(), 0, DType::kFloat32, dev))->wait());
}

TEST_CASE("nccl: a rank that never arrives is a TimeoutError, not a hang" * doctest::skip(!has_gpu())) {
  auto store = std::make_shared<rdzv::HashStore>();
  CHECK_THROWS_AS(make_nccl_group(test::setup_for(store, 0, 2, Millis(2'000))), TimeoutError);
}

TEST_CASE("nccl, two GPUs as threads: collectives, grouped ops, and the watchdog" *
          doctest::skip(!two_gpus())) {
  auto store = std::make_shared<rdzv::HashStore>();
  std::vector<std::vector<float>> sums(2), a2a(2);
  std::vector<std::string> timeouts(2);
  std::promise<void> seen;
  auto timed_out = seen.get_future().share();
  auto rank_fn = [&](int r) {
    auto pg = make_nccl_group(test::setup_for(store, r, 2));
    const int dev = r;  // LOCAL_RANK unset: rank modulo devices
    DeviceArray x({1.0f + r, 10.0f * r}, dev), y({0, 0}, dev);
    pg->all_reduce(x.view())->wait();
    sums[r] = x.host();
    DeviceArray s({static_cast<float>(r), 100.0f + r}, dev);
    pg->all_to_all(s.view(), y.view())->wait();
    a2a[r] = y.host();
    // Rank 1 stays out of this one: rank 0's watchdog must abort and report it.
    if (r == 0) {
      try {
        pg->all_reduce(x.view(), {ReduceOp::kSum, Millis(1'000)})->wait();
      } catch (const TimeoutError& e) {
        timeouts[r] = e.what();
      }
      seen.set_value();
    } else {
      timed_out.wait();  // keep rank 1's communicator alive until rank 0 has timed out
    }
  };
  auto f1 = std::async(std::launch::async, rank_fn, 1);
  rank_fn(0);
  f1.get();
  for (int r = 0; r < 2; ++r) {
    CHECK(sums[r] == std::vector<float>{3.0f, 10.0f});
    CHECK(a2a[r] == std::vector<float>{100.0f * r, 100.0f * r + 1});  // element r of each rank's input
  }
  CHECK(timeouts[0].find("all_reduce #3") != std::string::npos);
}
