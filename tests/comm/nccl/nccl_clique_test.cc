// NcclClique on its own (Skipped without a GPU): one process holding every visible device as the
// whole clique: created in one group, an all_reduce over the K communicators in one group, the
// join into a home stream, destruction; an abort; a clique whose other ranks never come.
#include "comm/nccl/nccl_clique.h"

#include <doctest/doctest.h>

#include <chrono>
#include <thread>
#include <vector>

#include "comm/nccl/device_vector.h"
#include "comm/nccl/gpu.h"
#include "common/deadline.h"

using namespace ddp;
using namespace ddp::comm;
using namespace ddp::comm::nccl_backend;
using ddp::test::DeviceVector;
using ddp::test::has_gpu;

namespace {

CliqueOptions every_device() {
  CliqueOptions o;
  for (int d = 0; d < cuda::device_count(); ++d) o.devices.push_back(d);
  o.home_device = 0;
  o.what = "test clique";
  return o;
}

// Polls until no communicator is in progress (or 60 s passed); returns the clique's state.
ncclResult_t settle(const NcclClique& c) {
  const Deadline deadline(Millis(60'000));
  ncclResult_t rc = c.async_error();
  while (rc == ncclInProgress && !deadline.expired()) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
    rc = c.async_error();
  }
  return rc;
}

ncclUniqueId fresh_id() {
  ncclUniqueId id;
  REQUIRE(ncclGetUniqueId(&id) == ncclSuccess);
  return id;
}

}  // namespace

TEST_CASE("nccl clique: K = every device, created in one group, all_reduce joined into the home stream" *
          doctest::skip(!has_gpu())) {
  NcclClique clique(every_device());
  const int k = static_cast<int>(clique.size());
  const ncclResult_t init = clique.init(fresh_id(), k, 0);
  REQUIRE((init == ncclSuccess || init == ncclInProgress));
  REQUIRE(settle(clique) == ncclSuccess);
  clique.mark_ready();

  std::vector<DeviceVector<float>> bufs;
  for (int i = 0; i < k; ++i) bufs.emplace_back(std::vector<float>{1.0f + i, 10.0f * i}, i);
  cudaStream_t home = nullptr;
  REQUIRE(cudaSetDevice(0) == cudaSuccess);
  REQUIRE(cudaStreamCreateWithFlags(&home, cudaStreamNonBlocking) == cudaSuccess);
  clique.wait_for(home);
  REQUIRE(ncclGroupStart() == ncclSuccess);
  for (int i = 0; i < k; ++i) {
    const Buffer b = bufs[i].view();
    const ncclResult_t rc =
        ncclAllReduce(b.data, b.data, b.count, ncclFloat32, ncclSum, clique.comm(i), clique.stream(i));
    CHECK((rc == ncclSuccess || rc == ncclInProgress));
  }
  const ncclResult_t end = ncclGroupEnd();
  CHECK((end == ncclSuccess || end == ncclInProgress));
  REQUIRE(settle(clique) == ncclSuccess);
  clique.join_into(home);
  REQUIRE(cudaStreamSynchronize(home) == cudaSuccess);  // done only once every device's stream is
  const float sum0 = static_cast<float>(k * (k + 1) / 2), sum1 = 10.0f * static_cast<float>(k * (k - 1) / 2);
  for (int i = 0; i < k; ++i) CHECK(bufs[i].host() == std::vector<float>{sum0, sum1});
  cudaStreamDestroy(home);
}

TEST_CASE("nccl clique: an aborted clique reports no error and is destroyed without finalizing" *
          doctest::skip(!has_gpu())) {
  NcclClique clique(every_device());
  const int k = static_cast<int>(clique.size());
  clique.init(fresh_id(), k, 0);
  REQUIRE(settle(clique) == ncclSuccess);
  clique.mark_ready();
  clique.abort();
  clique.abort();  // once only
  CHECK(clique.async_error() == ncclSuccess);
}

TEST_CASE("nccl clique: ranks that never come leave it in progress; destroying it aborts, no hang" *
          doctest::skip(!has_gpu())) {
  auto clique = std::make_unique<NcclClique>(every_device());
  const int k = static_cast<int>(clique->size());
  clique->init(fresh_id(), k + 1, 0);  // NCCL rank k never joins
  std::this_thread::sleep_for(std::chrono::milliseconds(500));
  CHECK(clique->async_error() == ncclInProgress);
  clique.reset();  // never marked ready: every communicator is aborted
}
