#pragma once
// GPU tests: has_gpu() for doctest::skip, and the line ctest's SKIP_REGULAR_EXPRESSION looks
// for, printed once at start-up when no CUDA device is visible.
#include <cstdio>

#include "comm/nccl/cuda_memory.h"

namespace ddp::test {

inline bool has_gpu() {
  static const bool visible = [] {
    const bool yes = comm::cuda::device_count() > 0;
    if (!yes) std::printf("DDP_GPU_TESTS_SKIPPED: no CUDA device is visible\n");
    return yes;
  }();
  return visible;
}

// Evaluated before doctest runs, so the skip line is printed even if every case is skipped.
inline const bool kGpuProbed = has_gpu();

}  // namespace ddp::test
