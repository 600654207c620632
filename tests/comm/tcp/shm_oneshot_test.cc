// One-shot collectives: the right result on every rank (all_reduce in rank order, so the same
// bits everywhere), and a step that stops at a late peer goes on from where it stopped.
#include "comm/tcp/shm_oneshot.h"

#include <doctest/doctest.h>

#include <algorithm>

#include "tests/comm/tcp/shm_test_util.h"

using namespace ddp;
using namespace ddp::comm;
using namespace ddp::comm::tcp;
using namespace ddp::comm::tcp::testing;

TEST_CASE("oneshot_fits: all_reduce up to oneshot_bytes, broadcast/all_gather/reduce_scatter up to a slot") {
  const ShmGeometry g{.world = 2, .depth = 4, .slot_bytes = 4096, .oneshot_bytes = 1024};
  std::vector<float> small(256), mid(1024), big(1025);
  CHECK(oneshot_fits({OpKind::kAllReduce}, view(small), g));
  CHECK_FALSE(oneshot_fits({OpKind::kAllReduce}, view(mid), g));
  CHECK(oneshot_fits({OpKind::kBroadcast}, view(mid), g));
  CHECK_FALSE(oneshot_fits({OpKind::kAllGather}, view(big), g));
  CHECK(oneshot_fits({OpKind::kBarrier}, {}, g));
  CHECK_FALSE(oneshot_fits({OpKind::kReduce}, view(small), g));
  CHECK_FALSE(oneshot_fits({OpKind::kAllToAll}, view(small), g));
}

TEST_CASE("all_reduce sum, max and avg on 3 ranks, several ops in a row") {
  ShmRanks ranks(3);
  auto errors = run_ranks(3, [&](int r) {
    auto ch = channel(ranks, r);
    uint64_t seq = 0;
    for (ReduceOp op : {ReduceOp::kSum, ReduceOp::kMax, ReduceOp::kAvg, ReduceOp::kSum, ReduceOp::kSum}) {
      std::vector<float> v(37);
      // Every rank holds the maximum somewhere ((i + 3r) mod 11 is distinct over ranks); the
      // AVG offsets 0, 2, 10 have mean 4: no rank's buffer is the answer.
      constexpr int kOffsets[] = {0, 2, 10};
      auto input = [&](int k, size_t i) {
        return op == ReduceOp::kMax ? static_cast<float>((i + 3 * static_cast<size_t>(k)) % 11)
                                    : static_cast<float>(kOffsets[k] * 100 + static_cast<int>(i));
      };
      for (size_t i = 0; i < v.size(); ++i) v[i] = input(r, i);
      run_op(oneshot_step, *ch, context({OpKind::kAllReduce, DType::kFloat32, op, -1, v.size(), seq++}),
             view(v), {});
      for (size_t i = 0; i < v.size(); ++i) {
        const float sum = input(0, i) + input(1, i) + input(2, i);
        const float want = op == ReduceOp::kSum   ? sum
                           : op == ReduceOp::kMax ? std::max({input(0, i), input(1, i), input(2, i)})
                                                  : sum / 3;
        CHECK(v[i] == want);
      }
    }
  });
  require_no_errors(errors);
}

TEST_CASE("broadcast, all_gather and reduce_scatter that fit a slot") {
  ShmRanks ranks(2);
  auto errors = run_ranks(2, [&](int r) {
    auto ch = channel(ranks, r);
    std::vector<int32_t> b(10, r == 1 ? 42 : 0);
    run_op(oneshot_step, *ch, context({OpKind::kBroadcast, DType::kInt32, ReduceOp::kSum, 1, 10, 0}), view(b),
           {});
    CHECK(b == std::vector<int32_t>(10, 42));
    std::vector<int32_t> in(3, r + 1), out(6);
    run_op(oneshot_step, *ch, context({OpKind::kAllGather, DType::kInt32, ReduceOp::kSum, -1, 3, 1}),
           view(in), view(out));
    CHECK(out == std::vector<int32_t>{1, 1, 1, 2, 2, 2});
    std::vector<int32_t> rs_in{1, 2, 3, 4}, rs_out(2);
    run_op(oneshot_step, *ch, context({OpKind::kReduceScatter, DType::kInt32, ReduceOp::kSum, -1, 2, 2}),
           view(rs_in), view(rs_out));
    CHECK(rs_out == (r == 0 ? std::vector<int32_t>{2, 4} : std::vector<int32_t>{6, 8}));
    run_op(oneshot_step, *ch, context({OpKind::kBarrier, DType::kUInt8, ReduceOp::kSum, -1, 0, 3}), {}, {});
  });
  require_no_errors(errors);
}

TEST_CASE("a non-blocking step stops at a late peer and resumes where it stopped") {
  ShmRanks ranks(2);
  auto c0 = channel(ranks, 0);
  auto c1 = channel(ranks, 1);
  // Past the control lines (kWideBytes): through a slot.
  constexpr size_t kN = kWideBytes / sizeof(float) + 8;
  std::vector<float> v0(kN, 1.0f), v1(kN, 2.0f);
  auto ctx0 = context({OpKind::kAllReduce, DType::kFloat32, ReduceOp::kSum, -1, kN, 0});
  auto ctx1 = ctx0;
  ShmProgress at0;
  const Buffer b0 = view(v0);
  c0->begin(ctx0);
  ShmStep s0{ctx0, b0, {}, at0, ShmPoll{false, 100}};
  CHECK_FALSE(oneshot_step(*c0, s0));  // rank 1 has not staged
  CHECK(at0.phase == 2);
  CHECK(v0[0] == 1.0f);
  auto errors = run_ranks(1, [&](int) { run_op(oneshot_step, *c1, ctx1, view(v1), {}); });
  s0.poll = ShmPoll{};
  CHECK(oneshot_step(*c0, s0));
  c0->end(ctx0);
  require_no_errors(errors);
  CHECK(v0 == std::vector<float>(kN, 3.0f));
  CHECK(v1 == std::vector<float>(kN, 3.0f));
}

TEST_CASE(
    "all_reduces in the control lines (at most 8 bytes, and up to kWideBytes): 2000 in a row, with slot "
    "ones") {
  ShmRanks ranks(3, 4096, 1024, 2);  // depth 2: slot reuse and small reuse both come around fast
  auto errors = run_ranks(3, [&](int r) {
    auto ch = channel(ranks, r);
    uint64_t seq = 0;
    for (int round = 0; round < 2000; ++round) {
      // Two floats (8 bytes: the word), kWideBytes (the wide lines) or, every fourth round, one
      // float more (a slot); the word and the lines share the halves' turns.
      constexpr size_t kWide = kWideBytes / sizeof(float);
      static constexpr size_t kCounts[] = {2, kWide, 2, kWide + 1, kWide, kWide, 2, kWide + 1};
      const size_t n = kCounts[round % 8];
      std::vector<float> v(n);
      for (size_t i = 0; i < n; ++i) v[i] = static_cast<float>(round + r * 10 + static_cast<int>(i));
      run_op(oneshot_step, *ch, context({OpKind::kAllReduce, DType::kFloat32, ReduceOp::kSum, -1, n, seq++}),
             view(v), {});
      for (size_t i = 0; i < n; ++i) {
        const float want = 3.0f * static_cast<float>(round + static_cast<int>(i)) + 30.0f;
        if (v[i] != want) throw std::runtime_error("round " + std::to_string(round) + ": wrong sum");
      }
    }
  });
  require_no_errors(errors);
}

TEST_CASE(
    "broadcasts in the control lines from every root, between all_reduces there and in slots: 2000 in a "
    "row") {
  ShmRanks ranks(3, 4096, 1024, 2);
  auto errors = run_ranks(3, [&](int r) {
    auto ch = channel(ranks, r);
    uint64_t seq = 0;
    constexpr size_t kWide = kWideBytes / sizeof(float);
    for (int round = 0; round < 2000; ++round) {
      // The word (1 or 2 floats), the wide lines, or a slot; each root in turn; every other op
      // an all_reduce in the control lines, so the two kinds share the halves' turns.
      static constexpr size_t kCounts[] = {1, kWide, 2, kWide + 1, kWide - 1, 2, kWide};
      const size_t n = kCounts[round % 7];
      const int root = round % 3;
      std::vector<float> v(n);
      for (size_t i = 0; i < n; ++i) v[i] = static_cast<float>(round * 100 + r * 10000 + static_cast<int>(i));
      run_op(oneshot_step, *ch,
             context({OpKind::kBroadcast, DType::kFloat32, ReduceOp::kSum, root, n, seq++}), view(v), {});
      for (size_t i = 0; i < n; ++i) {
        if (v[i] != static_cast<float>(round * 100 + root * 10000 + static_cast<int>(i)))
          throw std::runtime_error("round " + std::to_string(round) + ": wrong broadcast value");
      }
      std::vector<float> w(round % 2 == 0 ? 2 : kWide, static_cast<float>(r + round));
      run_op(oneshot_step, *ch,
             context({OpKind::kAllReduce, DType::kFloat32, ReduceOp::kSum, -1, w.size(), seq++}), view(w),
             {});
      if (w[0] != static_cast<float>(3 + 3 * round))
        throw std::runtime_error("round " + std::to_string(round) + ": wrong sum");
    }
  });
  require_no_errors(errors);
}
