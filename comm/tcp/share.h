#pragma once
// Splitting a buffer among ranks, for the algorithms over shared memory and sockets alike.
#include <algorithm>
#include <cstddef>

#include "comm/types.h"

namespace ddp::comm::tcp {

// Rank p's share of n elements split w ways (the first n % w shares get one more).
struct Part {
  size_t off, len;
};
inline Part part(size_t n, int w, int p) {
  const size_t base = n / static_cast<size_t>(w), rem = n % static_cast<size_t>(w),
               up = static_cast<size_t>(p);
  return {up * base + std::min(up, rem), base + (up < rem ? 1 : 0)};
}

// The address of element `elems` of b.
inline char* at(const Buffer& b, size_t elems) {
  return static_cast<char*>(b.data) + elems * dtype_size(b.dtype);
}

}  // namespace ddp::comm::tcp
