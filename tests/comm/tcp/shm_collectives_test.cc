// ShmCollectives: each op runs the algorithm its kind and size call for (one-shot or chunked),
// start() with a budget leaves a resumable op part-done for finish(), and a mismatch between
// ranks is an InvalidArgument whatever the algorithm.
#include "comm/tcp/shm_collectives.h"

#include <doctest/doctest.h>

#include <algorithm>
#include <thread>

#include "common/error.h"
#include "tests/comm/tcp/shm_test_util.h"

using namespace ddp;
using namespace ddp::comm;
using namespace ddp::comm::tcp;
using namespace ddp::comm::tcp::testing;

namespace {
std::unique_ptr<ShmCollectives> collectives(ShmRanks& ranks, int r) {
  return std::make_unique<ShmCollectives>(std::move(ranks.segments[static_cast<size_t>(r)]),
                                          ShmCollectives::Options{r, ranks.world(), true, 50, 1000},
                                          ranks.health[static_cast<size_t>(r)].get());
}
}  // namespace

TEST_CASE("resumable: barrier and every all_reduce; broadcast/all_gather/reduce_scatter within a slot") {
  ShmRanks ranks(2, 4096, 1024);
  auto c = collectives(ranks, 0);
  std::vector<float> small(16), big(4096);
  CHECK(c->resumable({OpKind::kBarrier}, {}));
  CHECK(c->resumable({OpKind::kAllReduce}, view(big)));
  CHECK(c->resumable({OpKind::kBroadcast}, view(small)));
  CHECK_FALSE(c->resumable({OpKind::kBroadcast}, view(big)));
  CHECK_FALSE(c->resumable({OpKind::kReduce}, view(small)));
  CHECK_FALSE(c->resumable({OpKind::kScatter}, view(small)));
}

TEST_CASE("run: all_reduce one-shot and chunked, then reduce and broadcast, in one sequence") {
  ShmRanks ranks(3, 4096, 1024, 2);
  require_no_errors(run_ranks(3, [&](int r) {
    auto c = collectives(ranks, r);
    uint64_t seq = 0;
    for (size_t n : {size_t{5}, size_t{256}, size_t{3000}}) {
      std::vector<float> v(n, static_cast<float>(r + 1));
      c->run(context({OpKind::kAllReduce, DType::kFloat32, ReduceOp::kSum, -1, n, seq++}), view(v), {});
      CHECK(v == std::vector<float>(n, 6.0f));
    }
    // Rank k holds (i + 3k) mod 11: every rank holds the maximum somewhere.
    auto input = [](int k, size_t i) { return static_cast<float>((i + 3 * static_cast<size_t>(k)) % 11); };
    std::vector<float> v(2000), mine(2000), max(2000);
    for (size_t i = 0; i < v.size(); ++i) {
      v[i] = mine[i] = input(r, i);
      max[i] = std::max({input(0, i), input(1, i), input(2, i)});
    }
    c->run(context({OpKind::kReduce, DType::kFloat32, ReduceOp::kMax, 0, 2000, seq++}), view(v), {});
    CHECK(v == (r == 0 ? max : mine));
    c->run(context({OpKind::kBroadcast, DType::kFloat32, ReduceOp::kSum, 0, 2000, seq++}), view(v), {});
    CHECK(v == max);
  }));
}

TEST_CASE("start with a budget: part-done when a peer is late, finish completes it") {
  ShmRanks ranks(2, 4096, 1024, 2);
  auto c0 = collectives(ranks, 0);
  auto c1 = collectives(ranks, 1);
  std::vector<float> v0(3000, 1.0f), v1(3000, 2.0f);
  auto ctx = context({OpKind::kAllReduce, DType::kFloat32, ReduceOp::kSum, -1, 3000, 0});
  CHECK_FALSE(c0->start(ctx, view(v0), {}, 100));
  std::exception_ptr error;
  std::thread peer([&] {  // rank 1 needs rank 0's later chunks: runs beside it
    try {
      c1->run(ctx, view(v1), {});
    } catch (...) {
      error = std::current_exception();
    }
  });
  c0->finish(ctx, view(v0), {});
  peer.join();
  require_no_errors({error});
  CHECK(v0 == std::vector<float>(3000, 3.0f));
  CHECK(v1 == std::vector<float>(3000, 3.0f));
}

TEST_CASE("ranks calling different collectives: InvalidArgument on both") {
  ShmRanks ranks(2, 4096, 1024, 2);
  auto errors = run_ranks(2, [&](int r) {
    auto c = collectives(ranks, r);
    std::vector<float> v(3000, 1.0f);
    const OpKind kind = r == 0 ? OpKind::kAllReduce : OpKind::kReduce;
    c->run(context({kind, DType::kFloat32, ReduceOp::kSum, r == 0 ? -1 : 0, 3000, 0}, Millis(5000)), view(v),
           {});
  });
  for (auto& e : errors) {
    REQUIRE(e);
    CHECK(what(e).find("mismatched collectives") != std::string::npos);
  }
}
