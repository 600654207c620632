// ShmChannel: shares split evenly with the remainder first; a slot is reusable only once every
// peer is done with its previous ticket; waits see what peers publish.
#include "comm/tcp/shm_channel.h"

#include <doctest/doctest.h>

#include <atomic>

#include "common/error.h"
#include "tests/comm/tcp/shm_test_util.h"

using namespace ddp;
using namespace ddp::comm;
using namespace ddp::comm::tcp;
using namespace ddp::comm::tcp::testing;

TEST_CASE("part: shares cover n exactly, in order, the first n % w one longer") {
  for (size_t n : {0u, 1u, 5u, 7u, 1000u}) {
    for (int w : {1, 2, 3, 4}) {
      size_t next = 0;
      for (int p = 0; p < w; ++p) {
        const Part s = part(n, w, p);
        CHECK(s.off == next);
        CHECK(s.len ==
              n / static_cast<size_t>(w) + (static_cast<size_t>(p) < n % static_cast<size_t>(w) ? 1 : 0));
        next += s.len;
      }
      CHECK(next == n);
    }
  }
}

TEST_CASE("tickets take slots in turn; a slot is free again only when every peer is done with it") {
  ShmRanks ranks(3, 4096, 1024, 2);
  auto a = channel(ranks, 0);
  auto b = channel(ranks, 1);
  auto c = channel(ranks, 2);
  CHECK(a->next_ticket() == 0);
  CHECK(a->next_ticket() == 1);
  CHECK(a->slot(0, 0) != a->slot(0, 1));
  CHECK(a->slot(0, 0) == a->slot(0, 2));  // depth 2
  CHECK(a->slot_free(0));
  CHECK(a->slot_free(1));
  CHECK_FALSE(a->slot_free(2));
  b->publish(Counter::kDone, 1);
  CHECK_FALSE(a->slot_free(2));  // rank 2 still reads ticket 0
  c->publish(Counter::kDone, 1);
  CHECK(a->slot_free(2));
  CHECK_FALSE(a->slot_free(3));
}

TEST_CASE("wait_all returns once every peer published; reached says the same") {
  ShmRanks ranks(3);
  std::atomic<int> done{0};
  auto errors = run_ranks(3, [&](int r) {
    auto ch = channel(ranks, r);
    auto ctx = context({OpKind::kBarrier});
    ch->begin(ctx);
    ch->publish(Counter::kStaged, 5);
    ch->wait_all(Counter::kStaged, 5, ctx);
    CHECK(ch->reached(Counter::kStaged, 5));
    CHECK_FALSE(ch->reached(Counter::kStaged, 6));
    done.fetch_add(1);
    ch->end(ctx);
    ch->publish(Counter::kDone, 1);
    ch->wait_all(Counter::kDone, 1, ctx);  // nobody unmaps while a peer still reads
  });
  require_no_errors(errors);
  CHECK(done.load() == 3);
}

TEST_CASE("a rank that took one more ticket than its peers fails its next op at once, naming both counts") {
  ShmRanks ranks(2);
  auto errors = run_ranks(2, [&](int r) {
    auto ch = channel(ranks, r);
    if (r == 1) ch->next_ticket();  // as if one of its algorithms had taken a ticket its peer did not
    auto ctx = context({OpKind::kBarrier}, Millis(10000));
    ch->begin(ctx);
    ch->publish(Counter::kStaged, 1);
    ch->wait_all(Counter::kStaged, 1, ctx);
  });
  for (int r : {0, 1}) {
    REQUIRE(errors[static_cast<size_t>(r)]);
    CHECK_THROWS_AS(std::rethrow_exception(errors[static_cast<size_t>(r)]), BackendError);
  }
  CHECK(what(errors[0]).find("rank 0 entered this op after 0 tickets, rank 1 after 1") != std::string::npos);
}

TEST_CASE("a non-blocking poll gives up after its budget; a blocking one says go at once") {
  ShmRanks ranks(2);
  auto ch = channel(ranks, 0);
  CHECK_FALSE(ch->poll([] { return false; }, ShmPoll{false, 100}));
  CHECK(ch->poll([] { return false; }, ShmPoll{true, 0}));
}

TEST_CASE("begin publishes the op's direct tag, then marks it entered") {
  ShmRanks ranks(2, 4096, 1024, 2);
  auto a = channel(ranks, 0);
  const OpDesc d{OpKind::kAllReduce, DType::kFloat32, ReduceOp::kSum, -1, 100, 5};
  auto ctx = context(d, Millis(1000));
  const RankControl& mine = ranks.segments[1].control(0);  // as a peer sees rank 0
  a->begin(ctx, {.direct_tag = 0xabc});
  CHECK(mine.counters[static_cast<int>(Counter::kEntered)].load() == 6);
  CHECK(mine.direct[5 % 2].load() == 0xabc);
  const OpDesc next{OpKind::kAllReduce, DType::kFloat32, ReduceOp::kSum, -1, 100, 6};
  auto ctx2 = context(next, Millis(1000));
  a->begin(ctx2);  // not in group memory: 0, in the other slot
  CHECK(mine.counters[static_cast<int>(Counter::kEntered)].load() == 7);
  CHECK(mine.direct[6 % 2].load() == 0);
  CHECK(mine.direct[5 % 2].load() == 0xabc);
}

TEST_CASE("begin_stores: rank 0's proposal is every rank's, read once rank 0 entered the op") {
  ShmRanks ranks(3, 4096, 1024, 2);
  auto a = channel(ranks, 0);
  auto b = channel(ranks, 1);
  for (uint64_t seq : {0u, 1u}) {
    const StoreMode proposed = seq == 0 ? StoreMode::kStreaming : StoreMode::kCached;
    const StoreMode other = seq == 0 ? StoreMode::kCached : StoreMode::kStreaming;
    auto ctx = context({OpKind::kAllReduce, DType::kFloat32, ReduceOp::kSum, -1, 100, seq}, Millis(1000));
    const Buffer none{};
    ShmProgress at_b;
    ShmStep step_b{ctx, none, none, at_b, ShmPoll{false, 50}, nullptr, other};
    b->begin(ctx, {.stores = other});
    CHECK_FALSE(b->begin_stores(step_b));  // rank 0 has not entered: a non-blocking poll gives up
    CHECK_FALSE(at_b.stores_known);
    a->begin(ctx, {.stores = proposed});
    ShmProgress at_a;
    ShmStep step_a{ctx, none, none, at_a, ShmPoll{false, 50}, nullptr, proposed};
    CHECK(a->begin_stores(step_a));
    CHECK(at_a.stores == proposed);
    CHECK(b->begin_stores(step_b));
    CHECK(at_b.stores == proposed);  // not its own proposal
  }
}
