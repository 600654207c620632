// Chunked all_reduce: exact results across chunk boundaries, uneven shares and slot reuse
// (more chunks than the ring's depth), and a resumable step that stops and goes on.
#include "comm/tcp/shm_allreduce_chunked.h"

#include <doctest/doctest.h>

#include <algorithm>
#include <thread>

#include "tests/comm/tcp/shm_test_util.h"

using namespace ddp;
using namespace ddp::comm;
using namespace ddp::comm::tcp;
using namespace ddp::comm::tcp::testing;

namespace {
// Rank r's input at i. For MAX the ranks hold distinct values at every i and each rank holds the
// largest somewhere (so no rank's buffer is the answer); for SUM, the index matters too.
int32_t input(ReduceOp op, int r, size_t i) {
  if (op == ReduceOp::kMax) return static_cast<int32_t>((i + 3 * static_cast<size_t>(r)) % 11);
  return static_cast<int32_t>(i % 1000) * (r + 1);
}

// `world` ranks all_reduce `n` int32 (slots of `slot` bytes, 4 KiB: 1024 elements a chunk;
// depth 2), rank 0 proposing `stores` (rank 1 the other way when `mixed`): every rank must
// use rank 0's.
void check_sum(int world, size_t n, ReduceOp op, StoreMode stores = StoreMode::kCached, bool mixed = false,
               size_t slot = 4096) {
  ShmRanks ranks(world, slot, 1024, 2);
  auto errors = run_ranks(world, [&](int r) {
    auto ch = channel(ranks, r);
    const StoreMode flipped = stores == StoreMode::kCached ? StoreMode::kStreaming : StoreMode::kCached;
    const StoreMode mine = mixed && r == 1 ? flipped : stores;
    for (uint64_t seq = 0; seq < 2; ++seq) {
      std::vector<int32_t> v(n);
      for (size_t i = 0; i < n; ++i) v[i] = input(op, r, i);
      const ShmProgress at =
          run_op(allreduce_chunked_step, *ch, context({OpKind::kAllReduce, DType::kInt32, op, -1, n, seq}),
                 view(v), {}, mine);
      CHECK(at.stores == stores);
      size_t bad = 0;
      for (size_t i = 0; i < n; ++i) {
        int32_t want = input(op, 0, i);
        for (int k = 1; k < world; ++k)
          want = op == ReduceOp::kMax ? std::max(want, input(op, k, i)) : want + input(op, k, i);
        bad += v[i] != want;
      }
      CHECK(bad == 0);
    }
  });
  require_no_errors(errors);
}
}  // namespace

TEST_CASE("2 ranks, many chunks (slots reused), a short last chunk") {
  check_sum(2, 10 * 1024 + 7, ReduceOp::kSum);
}

TEST_CASE("3 ranks: shares that do not divide the chunk") { check_sum(3, 5 * 1024 + 1, ReduceOp::kSum); }

TEST_CASE("4 ranks, max, one element past a chunk") { check_sum(4, 1025, ReduceOp::kMax); }

TEST_CASE("streaming stores: the same results; every rank uses rank 0's choice, whatever its own") {
  // 64 KiB slots: slices past 4 KiB, so the copies do stream (smaller ones are memcpy).
  constexpr size_t kSlot = 64 << 10, kChunk = kSlot / 4;
  for (const ReduceOp op : {ReduceOp::kSum, ReduceOp::kMax}) {
    check_sum(2, 5 * kChunk + 7, op, StoreMode::kStreaming, false, kSlot);
    check_sum(3, 3 * kChunk + 1, op, StoreMode::kStreaming, false, kSlot);
    check_sum(3, 3 * kChunk + 1, op, StoreMode::kStreaming, true, kSlot);
    check_sum(2, 5 * kChunk + 7, op, StoreMode::kCached, true, kSlot);
  }
}

TEST_CASE("the op's busy time (copies and reductions) is counted, and is less than its wall time") {
  ShmRanks ranks(2, 4096, 1024, 2);
  std::vector<int64_t> busy(2), wall(2);
  auto errors = run_ranks(2, [&](int r) {
    auto ch = channel(ranks, r);
    std::vector<float> v(8 * 1024, 1.0f);
    const Buffer b = view(v);
    auto ctx = context({OpKind::kAllReduce, DType::kFloat32, ReduceOp::kSum, -1, v.size(), 0});
    ShmProgress at;
    const auto t0 = Clock::now();
    ch->begin(ctx);
    ShmStep s{ctx, b, {}, at, ShmPoll{}};
    while (!allreduce_chunked_step(*ch, s)) {
    }
    ch->end(ctx);
    wall[r] = std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now() - t0).count();
    busy[r] = at.busy_ns;
    CHECK(v == std::vector<float>(v.size(), 2.0f));
  });
  require_no_errors(errors);
  for (int r = 0; r < 2; ++r) {
    CHECK(busy[r] > 0);
    CHECK(busy[r] <= wall[r]);
  }
}

TEST_CASE("a non-blocking step stops at a late peer and finishes later with the right result") {
  ShmRanks ranks(2, 4096, 1024, 2);
  auto c0 = channel(ranks, 0);
  auto c1 = channel(ranks, 1);
  const size_t n = 3000;
  std::vector<float> v0(n, 1.0f), v1(n, 2.0f);
  auto ctx = context({OpKind::kAllReduce, DType::kFloat32, ReduceOp::kSum, -1, n, 0});
  ShmProgress at0;
  c0->begin(ctx);
  const Buffer b0 = view(v0);
  ShmStep s0{ctx, b0, {}, at0, ShmPoll{false, 100}};
  CHECK_FALSE(allreduce_chunked_step(*c0, s0));
  CHECK(at0.off == 0);
  std::exception_ptr error;
  std::thread peer([&] {  // rank 1 needs rank 0's later chunks: runs beside it
    try {
      run_op(allreduce_chunked_step, *c1, ctx, view(v1), {});
    } catch (...) {
      error = std::current_exception();
    }
  });
  s0.poll = ShmPoll{};
  const bool done = allreduce_chunked_step(*c0, s0);
  c0->end(ctx);
  peer.join();
  CHECK(done);
  require_no_errors({error});
  CHECK(v0 == std::vector<float>(n, 3.0f));
  CHECK(v1 == std::vector<float>(n, 3.0f));
}
