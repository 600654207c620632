// The one-pass reductions over peers' buffers (shm_peer_buffers.h), ranks as threads whose
// buffers are mapped into each other (a DirectView of plain vectors): reduce_share leaves every
// rank's buffer holding the reduction, each element exact, over many chunks and an uneven split;
// reduce_block reduces each rank's block into its output alone; scatter_own writes each rank's
// input into its block of every output. The attached way (cross-memory
// attach) runs the same passes: shm_allreduce_cross_test, shm_exchange_direct_test.
#include "comm/tcp/shm_peer_buffers.h"

#include <doctest/doctest.h>

#include <algorithm>
#include <vector>

#include "comm/tcp/shm_region.h"
#include "tests/comm/tcp/shm_test_util.h"

using namespace ddp;
using namespace ddp::comm;
using namespace ddp::comm::tcp;
using namespace ddp::comm::tcp::testing;

namespace {

constexpr int kWorld = 3;
constexpr size_t kSlot = 4096;  // 1,024 floats a chunk

// Rank r's element i: distinct per rank and element, exact in float.
float value(int r, size_t i) { return static_cast<float>((r + 1) * 1000 + static_cast<int>(i % 997)); }

DirectView view_of(std::vector<std::vector<float>>& bufs) {
  DirectView v;
  for (auto& b : bufs) v.bufs.push_back(reinterpret_cast<char*>(b.data()));
  v.tag = 1;
  return v;
}

// Runs pass(ch, step, buffers) on every rank, each over its own channel and `in`/`out`; the
// buffers mapped are the inputs, or the outputs (`mapped`).
template <typename Pass>
void on_every_rank(std::vector<std::vector<float>>& ins, std::vector<std::vector<float>>& outs, OpDesc desc,
                   Pass pass, bool outputs_mapped = false) {
  ShmRanks ranks(kWorld, kSlot);
  auto& mapped = outputs_mapped ? outs : ins;
  const DirectView direct = view_of(mapped);
  require_no_errors(run_ranks(kWorld, [&](int r) {
    auto ch = channel(ranks, r);
    const OpContext ctx = context(desc);
    const Buffer in = view(ins[static_cast<size_t>(r)]), out = view(outs[static_cast<size_t>(r)]);
    ShmProgress at;
    ShmStep step{ctx, in, out, at, ShmPoll{}, &direct};
    const PeerBuffers bufs = PeerBuffers::mapped(*ch, step);
    CHECK(bufs.chunk_bytes() == kSlot);
    CHECK(bufs.own(8) == reinterpret_cast<char*>(mapped[static_cast<size_t>(r)].data()) + 8);
    pass(*ch, step, bufs);
  }));
}

}  // namespace

TEST_CASE("reduce_share: every rank's buffer holds the reduction, sum and avg, over many chunks") {
  for (ReduceOp op : {ReduceOp::kSum, ReduceOp::kAvg, ReduceOp::kMax}) {
    CAPTURE(static_cast<int>(op));
    const size_t n = 10 * 1024 + 7;  // uneven shares, several chunks each
    std::vector<std::vector<float>> ins(kWorld), outs(kWorld);
    for (int r = 0; r < kWorld; ++r) {
      for (size_t i = 0; i < n; ++i) ins[static_cast<size_t>(r)].push_back(value(r, i));
    }
    on_every_rank(
        ins, outs, {OpKind::kAllReduce, DType::kFloat32, op, -1, n, 0},
        [](const ShmChannel& ch, const ShmStep& s, const PeerBuffers& b) { reduce_share(ch, s, b); });
    for (size_t i = 0; i < n; ++i) {
      float want = op == ReduceOp::kMax ? value(kWorld - 1, i) : value(0, i) + value(1, i) + value(2, i);
      if (op == ReduceOp::kAvg) want /= kWorld;
      for (int r = 0; r < kWorld; ++r) {
        if (ins[static_cast<size_t>(r)][i] != want) {
          FAIL("rank ", r, " element ", i, ": ", ins[static_cast<size_t>(r)][i], ", want ", want);
        }
      }
    }
  }
}

TEST_CASE("reduce_block: each rank's output is its block of every input, reduced; inputs untouched") {
  const size_t n = 3 * 1024 + 5;  // a block: several chunks
  std::vector<std::vector<float>> ins(kWorld), outs(kWorld, std::vector<float>(n));
  for (int r = 0; r < kWorld; ++r) {
    for (size_t i = 0; i < kWorld * n; ++i) ins[static_cast<size_t>(r)].push_back(value(r, i));
  }
  const auto before = ins;
  on_every_rank(ins, outs, {OpKind::kReduceScatter, DType::kFloat32, ReduceOp::kSum, -1, n, 0},
                [](const ShmChannel& ch, const ShmStep& s, const PeerBuffers& b) { reduce_block(ch, s, b); });
  CHECK(ins == before);
  for (int r = 0; r < kWorld; ++r) {
    for (size_t i = 0; i < n; ++i) {
      const size_t at = static_cast<size_t>(r) * n + i;
      const float want = value(0, at) + value(1, at) + value(2, at);
      if (outs[static_cast<size_t>(r)][i] != want) FAIL("rank ", r, " element ", i);
    }
  }
}

TEST_CASE("scatter_own: every rank's output holds every rank's input, in rank order; in place too") {
  const size_t n = 2 * 1024 + 3;
  for (bool in_place : {false, true}) {
    CAPTURE(in_place);
    std::vector<std::vector<float>> ins(kWorld), outs(kWorld, std::vector<float>(kWorld * n));
    for (int r = 0; r < kWorld; ++r) {
      for (size_t i = 0; i < n; ++i) ins[static_cast<size_t>(r)].push_back(value(r, i));
      // In place: the input is the rank's own block of its output.
      if (in_place)
        std::copy(ins[static_cast<size_t>(r)].begin(), ins[static_cast<size_t>(r)].end(),
                  outs[static_cast<size_t>(r)].begin() + static_cast<long>(r * n));
    }
    std::vector<std::vector<float>> in_views = ins;
    ShmRanks ranks(kWorld, kSlot);
    const DirectView direct = view_of(outs);
    require_no_errors(run_ranks(kWorld, [&](int r) {
      auto ch = channel(ranks, r);
      const OpContext ctx = context({OpKind::kAllGather, DType::kFloat32, ReduceOp::kSum, -1, n, 0});
      auto& own_out = outs[static_cast<size_t>(r)];
      const Buffer in = in_place ? Buffer{own_out.data() + r * n, n, DType::kFloat32}
                                 : view(in_views[static_cast<size_t>(r)]);
      const Buffer out = view(own_out);
      ShmProgress at;
      ShmStep step{ctx, in, out, at, ShmPoll{}, &direct};
      scatter_own(*ch, step, PeerBuffers::mapped(*ch, step));
    }));
    for (int r = 0; r < kWorld; ++r) {
      for (int from = 0; from < kWorld; ++from) {
        for (size_t i = 0; i < n; ++i) {
          if (outs[static_cast<size_t>(r)][static_cast<size_t>(from) * n + i] != value(from, i))
            FAIL("rank ", r, " block ", from, " element ", i);
        }
      }
    }
  }
}
