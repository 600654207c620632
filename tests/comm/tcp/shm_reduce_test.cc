// Chunked reduce and reduce_scatter: the root (or each rank's piece) gets the exact reduction
// across chunks, and non-roots' buffers are left as they were.
#include "comm/tcp/shm_reduce.h"

#include <doctest/doctest.h>

#include "tests/comm/tcp/shm_test_util.h"

using namespace ddp;
using namespace ddp::comm;
using namespace ddp::comm::tcp;
using namespace ddp::comm::tcp::testing;

TEST_CASE("reduce to root 1 of 3 ranks over several chunks; the others keep their input") {
  ShmRanks ranks(3, 4096, 1024, 2);
  const size_t n = 4 * 1024 + 3;
  auto errors = run_ranks(3, [&](int r) {
    auto ch = channel(ranks, r);
    std::vector<int32_t> v(n);
    for (size_t i = 0; i < n; ++i) v[i] = static_cast<int32_t>(i) + r;
    run_op(reduce_step, *ch, context({OpKind::kReduce, DType::kInt32, ReduceOp::kSum, 1, n, 0}), view(v), {});
    size_t bad = 0;
    for (size_t i = 0; i < n; ++i)
      bad += v[i] != (r == 1 ? 3 * static_cast<int32_t>(i) + 3 : static_cast<int32_t>(i) + r);
    CHECK(bad == 0);
  });
  require_no_errors(errors);
}

TEST_CASE("reduce_scatter of 3 ranks in several pieces, avg") {
  ShmRanks ranks(3, 4096, 1024, 2);
  const size_t n = 1000;  // per rank: 3 pieces of 341 floats a slot
  auto errors = run_ranks(3, [&](int r) {
    auto ch = channel(ranks, r);
    std::vector<float> in(3 * n), out(n);
    for (size_t i = 0; i < in.size(); ++i) in[i] = static_cast<float>(i) * static_cast<float>(r + 1);
    run_op(reduce_scatter_step, *ch,
           context({OpKind::kReduceScatter, DType::kFloat32, ReduceOp::kAvg, -1, n, 0}), view(in), view(out));
    size_t bad = 0;
    for (size_t i = 0; i < n; ++i)
      bad += out[i] != static_cast<float>(static_cast<size_t>(r) * n + i) * 6.0f / 3.0f;
    CHECK(bad == 0);
  });
  require_no_errors(errors);
}
