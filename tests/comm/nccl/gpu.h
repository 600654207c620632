#pragma once
// GPU tests: has_gpu() for doctest::skip. Without a visible CUDA device every case of a binary
// is skipped and test_main.cc exits 77, which ctest reports as Skipped (not Passed).
#include "comm/nccl/cuda_memory.h"

namespace ddp::test {

inline bool has_gpu() {
  static const bool visible = comm::cuda::device_count() > 0;
  return visible;
}

}  // namespace ddp::test
