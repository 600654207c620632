#include "comm/nccl/cuda_memory.h"

#include <doctest/doctest.h>

#include <vector>

#include "comm/nccl/gpu.h"
#include "common/error.h"

using namespace ddp;
using namespace ddp::comm;
using ddp::test::has_gpu;

TEST_CASE("cuda memory: device round trip through pinned memory" * doctest::skip(!has_gpu())) {
  std::vector<float> in(1000), out(1000, -1.0f);
  for (size_t i = 0; i < in.size(); ++i) in[i] = static_cast<float>(i);
  auto dev = cuda::device_alloc(in.size() * sizeof(float), 0);
  auto pinned = cuda::pinned_alloc(in.size() * sizeof(float));
  cuda::copy_to_device(dev.get(), in.data(), in.size() * sizeof(float), 0);
  cuda::copy_to_host(pinned.get(), dev.get(), in.size() * sizeof(float), 0);
  const float* p = static_cast<const float*>(pinned.get());
  CHECK(p[999] == 999.0f);
  CHECK(cuda::default_device(3) < cuda::device_count());
}

TEST_CASE("cuda memory: a bad device is a BackendError" * doctest::skip(!has_gpu())) {
  CHECK_THROWS_AS(cuda::device_alloc(16, cuda::device_count() + 7), BackendError);
}
