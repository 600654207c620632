// Chunked broadcast, all_gather, gather, scatter and all_to_all: every element lands where the
// op says, across chunks and slot reuse.
#include "comm/tcp/shm_exchange.h"

#include <doctest/doctest.h>

#include "tests/comm/tcp/shm_test_util.h"

using namespace ddp;
using namespace ddp::comm;
using namespace ddp::comm::tcp;
using namespace ddp::comm::tcp::testing;

namespace {
constexpr size_t kN = 2500;  // elements per rank: 3 chunks of a 4 KiB slot, more pieces for scatter
int32_t value(int rank, size_t i) { return rank * 100000 + static_cast<int32_t>(i); }
}  // namespace

TEST_CASE("broadcast from rank 2 over several chunks") {
  ShmRanks ranks(3, 4096, 1024, 2);
  require_no_errors(run_ranks(3, [&](int r) {
    auto ch = channel(ranks, r);
    std::vector<int32_t> v(kN);
    for (size_t i = 0; i < kN; ++i) v[i] = value(r, i);
    run_op(broadcast_step, *ch, context({OpKind::kBroadcast, DType::kInt32, ReduceOp::kSum, 2, kN, 0}),
           view(v), {});
    size_t bad = 0;
    for (size_t i = 0; i < kN; ++i) bad += v[i] != value(2, i);
    CHECK(bad == 0);
  }));
}

TEST_CASE("all_gather, then gather to rank 0 (the others' outputs untouched)") {
  ShmRanks ranks(3, 4096, 1024, 2);
  require_no_errors(run_ranks(3, [&](int r) {
    auto ch = channel(ranks, r);
    std::vector<int32_t> in(kN), out(3 * kN, -1);
    for (size_t i = 0; i < kN; ++i) in[i] = value(r, i);
    run_op(all_gather_step, *ch, context({OpKind::kAllGather, DType::kInt32, ReduceOp::kSum, -1, kN, 0}),
           view(in), view(out));
    size_t bad = 0;
    for (size_t i = 0; i < 3 * kN; ++i) bad += out[i] != value(static_cast<int>(i / kN), i % kN);
    CHECK(bad == 0);
    std::vector<int32_t> g(3 * kN, -1);
    run_op(all_gather_step, *ch, context({OpKind::kGather, DType::kInt32, ReduceOp::kSum, 0, kN, 1}),
           view(in), view(g));
    bad = 0;
    for (size_t i = 0; i < 3 * kN; ++i)
      bad += g[i] != (r == 0 ? value(static_cast<int>(i / kN), i % kN) : -1);
    CHECK(bad == 0);
  }));
}

TEST_CASE("scatter from rank 1, and all_to_all") {
  ShmRanks ranks(3, 4096, 1024, 2);
  require_no_errors(run_ranks(3, [&](int r) {
    auto ch = channel(ranks, r);
    std::vector<int32_t> in(3 * kN), out(kN);
    for (size_t i = 0; i < in.size(); ++i) in[i] = value(r, i);
    run_op(scatter_step, *ch, context({OpKind::kScatter, DType::kInt32, ReduceOp::kSum, 1, kN, 0}), view(in),
           view(out));
    size_t bad = 0;
    for (size_t i = 0; i < kN; ++i) bad += out[i] != value(1, static_cast<size_t>(r) * kN + i);
    CHECK(bad == 0);
    std::vector<int32_t> a2a(3 * kN);
    run_op(all_to_all_step, *ch, context({OpKind::kAllToAll, DType::kInt32, ReduceOp::kSum, -1, 3 * kN, 1}),
           view(in), view(a2a));
    bad = 0;  // block p of my output is block r of rank p's input
    for (size_t i = 0; i < 3 * kN; ++i) {
      bad += a2a[i] != value(static_cast<int>(i / kN), static_cast<size_t>(r) * kN + i % kN);
    }
    CHECK(bad == 0);
  }));
}
