// plan(): every decision it makes, listed as a table of cases (the medium, the algorithm, the
// cross-memory offer and the store chooser), and the one question it asks only where needed.
#include "comm/tcp/plan.h"

#include <doctest/doctest.h>

#include <string>
#include <vector>

#include "tests/common/settings_test_util.h"

namespace ddp::comm::tcp {
namespace {

using A = Algorithm;
using M = TransportKind;
using S = StoreSlot;
using T = TransportSetting;

constexpr size_t kKiB = 1024, kMiB = kKiB * kKiB;

// A group of `world` ranks, `per_host` on each host; shared memory with 1 KiB one-shots in 64
// KiB slots; sockets with 64 KiB one-shots and 256 KiB chunks; hierarchical small path 64 KiB.
GroupFacts group(int world, int per_host, bool cross = false) {
  return {.world = world,
          .hosts = per_host > 0 ? world / per_host : 2,
          .per_host = per_host,
          .shm_oneshot_bytes = kKiB,
          .shm_slot_bytes = 64 * kKiB,
          .cross = cross};
}

struct Asked {
  bool answer = false;
  int times = 0;
};
bool answer(void* self) {
  auto* a = static_cast<Asked*>(self);
  ++a->times;
  return a->answer;
}

struct Case {
  const char* what;
  GroupFacts group;
  OpKind kind;
  size_t bytes;
  bool in_group_memory;
  Plan want;
};

Plan plan_of(const Case& c, Asked& asked) {
  asked.answer = c.in_group_memory;
  const OpFacts op{
      .kind = c.kind, .bytes = c.bytes, .count = c.bytes / 4, .in_group_memory = answer, .self = &asked};
  return plan(c.group, op);
}

void check(const std::vector<Case>& cases) {
  for (const Case& c : cases) {
    const std::string what = c.what;
    CAPTURE(what);
    Asked asked;
    const Plan got = plan_of(c, asked);
    CHECK(std::string(to_string(got.medium)) == to_string(c.want.medium));
    CHECK(std::string(to_string(got.algorithm)) == to_string(c.want.algorithm));
    CHECK(got.offer_cross == c.want.offer_cross);
    CHECK(static_cast<int>(got.stores) == static_cast<int>(c.want.stores));
    CHECK(asked.times <= 1);
  }
}

TEST_CASE("the medium: one rank, one host, several hosts with several ranks each, or sockets") {
  GroupFacts g = group(4, 4);
  CHECK(plan(group(1, 1), nullptr).medium == M::kLocal);
  CHECK(plan(g, nullptr).medium == M::kShm);
  g.shm_ok = false;  // a rank could not map the segment
  CHECK(plan(g, nullptr).medium == M::kSocket);
  CHECK(plan(group(8, 4), nullptr).medium == M::kHierarchical);
  CHECK(plan(group(4, 1), nullptr).medium == M::kSocket);   // one rank per host
  CHECK(plan(group(6, 0), nullptr).medium == M::kSocket);   // hosts hold different numbers
  for (T wanted : {T::kAuto, T::kShm, T::kHierarchical}) {  // the others follow the layout
    g = group(8, 4);
    g.wanted = wanted;
    CHECK(plan(g, nullptr).medium == M::kHierarchical);
    g = group(4, 4);
    g.wanted = wanted;
    CHECK(plan(g, nullptr).medium == M::kShm);
  }
  g.wanted = T::kSocket;
  CHECK(plan(g, nullptr).medium == M::kSocket);
  CHECK(plan(g, nullptr).algorithm == A::kNone);
}

TEST_CASE("shared memory: one-shot up to a slot, else each op's own; direct in group memory") {
  const GroupFacts g = group(4, 4);
  check({
      {"tiny all_reduce", g, OpKind::kAllReduce, 8, true, {M::kShm, A::kShmOneshot}},
      {"all_reduce at the one-shot size", g, OpKind::kAllReduce, kKiB, true, {M::kShm, A::kShmOneshot}},
      {"all_reduce past it",
       g,
       OpKind::kAllReduce,
       kKiB + 4,
       false,
       {M::kShm, A::kShmAllReduceChunked, false, S::kAllReduce}},
      {"all_reduce in group memory", g, OpKind::kAllReduce, kMiB, true, {M::kShm, A::kShmAllReduceDirect}},
      {"broadcast in a slot", g, OpKind::kBroadcast, 64 * kKiB, false, {M::kShm, A::kShmOneshot}},
      {"broadcast past it", g, OpKind::kBroadcast, kMiB, false, {M::kShm, A::kShmBroadcast}},
      {"all_gather in a slot", g, OpKind::kAllGather, 16 * kKiB, true, {M::kShm, A::kShmOneshot}},
      {"all_gather", g, OpKind::kAllGather, kMiB, false, {M::kShm, A::kShmAllGather, false, S::kAllGather}},
      {"all_gather into group memory", g, OpKind::kAllGather, kMiB, true, {M::kShm, A::kShmAllGatherDirect}},
      {"gather", g, OpKind::kGather, kMiB, true, {M::kShm, A::kShmAllGather}},
      {"reduce_scatter",
       g,
       OpKind::kReduceScatter,
       kMiB,
       false,
       {M::kShm, A::kShmReduceScatter, false, S::kReduceScatter}},
      {"reduce_scatter from group memory",
       g,
       OpKind::kReduceScatter,
       kMiB,
       true,
       {M::kShm, A::kShmReduceScatterDirect}},
      {"reduce", g, OpKind::kReduce, 16, true, {M::kShm, A::kShmReduce}},
      {"scatter", g, OpKind::kScatter, 16, false, {M::kShm, A::kShmScatter}},
      {"all_to_all", g, OpKind::kAllToAll, 16, false, {M::kShm, A::kShmAllToAll, false, S::kAllToAll}},
      {"barrier", g, OpKind::kBarrier, 0, false, {M::kShm, A::kShmOneshot}},
  });
}

TEST_CASE("shared memory reaching every peer: inputs offered to cross-memory attach") {
  const GroupFacts g = group(4, 4, true);
  check({
      {"tiny all_reduce", g, OpKind::kAllReduce, 8, false, {M::kShm, A::kShmOneshot}},
      {"all_reduce",
       g,
       OpKind::kAllReduce,
       kMiB,
       false,
       {M::kShm, A::kShmAllReduceCross, true, S::kAllReduce}},
      {"all_reduce in group memory",
       g,
       OpKind::kAllReduce,
       kMiB,
       true,
       {M::kShm, A::kShmAllReduceDirect, true}},
      {"one-shot all_gather under a page", g, OpKind::kAllGather, 4095, false, {M::kShm, A::kShmOneshot}},
      {"one-shot all_gather of a page",
       g,
       OpKind::kAllGather,
       4096,
       false,
       {M::kShm, A::kShmAllGatherOneshotCross, true, S::kAllGather}},
      {"one-shot broadcast of a page", g, OpKind::kBroadcast, 4096, false, {M::kShm, A::kShmOneshot}},
      {"all_gather",
       g,
       OpKind::kAllGather,
       kMiB,
       false,
       {M::kShm, A::kShmAllGatherCross, true, S::kAllGather}},
      {"all_gather into group memory",
       g,
       OpKind::kAllGather,
       kMiB,
       true,
       {M::kShm, A::kShmAllGatherDirect, true}},
      {"reduce_scatter",
       g,
       OpKind::kReduceScatter,
       kMiB,
       false,
       {M::kShm, A::kShmReduceScatterCross, true, S::kReduceScatter}},
      {"gather stages", g, OpKind::kGather, kMiB, false, {M::kShm, A::kShmAllGather}},
      {"broadcast stages", g, OpKind::kBroadcast, kMiB, false, {M::kShm, A::kShmBroadcast}},
  });
}

TEST_CASE("where the buffer lives is asked only where a direct algorithm could run") {
  for (bool cross : {false, true}) {
    const GroupFacts g = group(4, 4, cross);
    for (auto [kind, bytes, asked] :
         std::vector<std::tuple<OpKind, size_t, int>>{{OpKind::kAllReduce, 8, 0},
                                                      {OpKind::kAllReduce, kMiB, 1},
                                                      {OpKind::kAllGather, 64, 0},
                                                      {OpKind::kAllGather, kMiB, 1},
                                                      {OpKind::kReduceScatter, kMiB, 1},
                                                      {OpKind::kGather, kMiB, 0},
                                                      {OpKind::kBroadcast, kMiB, 0}}) {
      Asked a;
      plan_of({"", g, kind, bytes, true, {}}, a);
      CHECK(a.times == asked);
    }
    // Without a question to ask, the buffer is taken as plain memory.
    const Plan p = plan(g, OpFacts{.kind = OpKind::kAllReduce, .bytes = kMiB, .count = kMiB / 4});
    CHECK(p.algorithm == (cross ? A::kShmAllReduceCross : A::kShmAllReduceChunked));
  }
}

TEST_CASE("shared memory: which plans may pause and resume") {
  const GroupFacts plain = group(4, 4), cross = group(4, 4, true);
  auto resumable = [](const GroupFacts& g, OpKind kind, size_t bytes, bool in_group_memory) {
    Asked a;
    return shm_resumable(plan_of({"", g, kind, bytes, in_group_memory, {}}, a));
  };
  CHECK(resumable(plain, OpKind::kAllReduce, kMiB, false));
  CHECK(resumable(plain, OpKind::kAllReduce, kMiB, true));
  CHECK(resumable(plain, OpKind::kBroadcast, 64, false));  // one-shot
  CHECK_FALSE(resumable(plain, OpKind::kBroadcast, kMiB, false));
  CHECK_FALSE(resumable(plain, OpKind::kAllGather, kMiB, false));
  CHECK_FALSE(resumable(plain, OpKind::kAllGather, kMiB, true));
  CHECK(resumable(cross, OpKind::kAllGather, kMiB, false));
  CHECK(resumable(cross, OpKind::kAllGather, kMiB, true));
  CHECK_FALSE(resumable(cross, OpKind::kReduceScatter, kMiB, false));
}

TEST_CASE("sockets: all_reduce one-shot when small, direct for 2 or 3 ranks, hd under a chunk a rank, ring") {
  check({
      {"one-shot size", group(16, 1), OpKind::kAllReduce, 64 * kKiB, false, {M::kSocket, A::kSocketOneshot}},
      {"2 ranks, 1 GiB", group(2, 1), OpKind::kAllReduce, 1024 * kMiB, false, {M::kSocket, A::kSocketDirect}},
      {"3 ranks, 1 GiB", group(3, 1), OpKind::kAllReduce, 1024 * kMiB, false, {M::kSocket, A::kSocketDirect}},
      {"4 ranks, parts just under a chunk",
       group(4, 1),
       OpKind::kAllReduce,
       kMiB - 4,
       false,
       {M::kSocket, A::kSocketHalvingDoubling}},
      {"4 ranks, parts of a chunk",
       group(4, 1),
       OpKind::kAllReduce,
       kMiB,
       false,
       {M::kSocket, A::kSocketRing}},
      {"64 ranks, 1 MiB",
       group(64, 1),
       OpKind::kAllReduce,
       kMiB,
       false,
       {M::kSocket, A::kSocketHalvingDoubling}},
      {"64 ranks, 256 MiB",
       group(64, 1),
       OpKind::kAllReduce,
       256 * kMiB,
       false,
       {M::kSocket, A::kSocketRing}},
      {"broadcast", group(4, 1), OpKind::kBroadcast, kMiB, false, {M::kSocket, A::kSocketOp}},
      {"barrier", group(4, 1), OpKind::kBarrier, 0, false, {M::kSocket, A::kSocketOp}},
  });
  // Fewer elements than ranks (large ones): every buffer to every peer, whatever its size.
  CHECK(plan(group(4, 1), OpFacts{.kind = OpKind::kAllReduce, .bytes = kMiB, .count = 3}).algorithm ==
        A::kSocketOneshot);
  // The rule follows the chunk size (the same knob on every rank), not a constant.
  GroupFacts g = group(8, 1);
  g.socket_chunk_bytes = 64 * kKiB;
  CHECK(plan(g, OpFacts{.kind = OpKind::kAllReduce, .bytes = kMiB, .count = kMiB / 4}).algorithm ==
        A::kSocketRing);
}

TEST_CASE("sockets: DDP_TCP_SOCKET_ALGO forces all_reduce's algorithm past the one-shot size") {
  for (auto [algo, want] :
       std::vector<std::pair<SocketAlgo, A>>{{SocketAlgo::kDirect, A::kSocketDirect},
                                             {SocketAlgo::kHalvingDoubling, A::kSocketHalvingDoubling},
                                             {SocketAlgo::kRing, A::kSocketRing}}) {
    GroupFacts g = group(2, 1);
    g.socket_algo = algo;
    CHECK(plan(g, OpFacts{.kind = OpKind::kAllReduce, .bytes = kMiB, .count = kMiB / 4}).algorithm == want);
    CHECK(plan(g, OpFacts{.kind = OpKind::kAllReduce, .bytes = 64, .count = 16}).algorithm ==
          A::kSocketOneshot);
  }
}

TEST_CASE("hierarchical: small all_reduce and barrier whole, large measured, two steps, the rest flat") {
  const GroupFacts g = group(8, 4);
  check({
      {"all_reduce at the small limit",
       g,
       OpKind::kAllReduce,
       64 * kKiB,
       false,
       {M::kHierarchical, A::kHierarchicalSmall}},
      {"all_reduce past it",
       g,
       OpKind::kAllReduce,
       64 * kKiB + 4,
       false,
       {M::kHierarchical, A::kHierarchicalLarge}},
      {"barrier", g, OpKind::kBarrier, 0, false, {M::kHierarchical, A::kHierarchicalSmall}},
      {"broadcast", g, OpKind::kBroadcast, kMiB, false, {M::kHierarchical, A::kHierarchicalTwoStep}},
      {"all_gather", g, OpKind::kAllGather, kMiB, false, {M::kHierarchical, A::kHierarchicalTwoStep}},
      {"reduce_scatter", g, OpKind::kReduceScatter, kMiB, false, {M::kHierarchical, A::kHierarchicalTwoStep}},
      {"reduce", g, OpKind::kReduce, kMiB, false, {M::kHierarchical, A::kHierarchicalTwoStep}},
      {"gather", g, OpKind::kGather, kMiB, false, {M::kHierarchical, A::kHierarchicalTwoStep}},
      {"scatter", g, OpKind::kScatter, kMiB, false, {M::kHierarchical, A::kHierarchicalTwoStep}},
      {"all_to_all", g, OpKind::kAllToAll, kMiB, false, {M::kHierarchical, A::kHierarchicalFlat}},
  });
  GroupFacts measured = g;
  measured.hierarchy_small_bytes = kMiB;  // the calibrated limit moves the line
  CHECK(plan(measured, OpFacts{.kind = OpKind::kAllReduce, .bytes = kMiB}).algorithm ==
        A::kHierarchicalSmall);
}

TEST_CASE("one rank: a copy at most; DDP_TCP_TRANSPORT reads as TransportSetting") {
  CHECK(plan(group(1, 1), OpFacts{.kind = OpKind::kAllGather, .bytes = 64}).algorithm == A::kCopy);
  settings::testing::check_choice_as(
      settings::kTcpTransport,
      std::initializer_list<std::pair<std::string, T>>{
          {"auto", T::kAuto}, {"shm", T::kShm}, {"socket", T::kSocket}, {"hierarchical", T::kHierarchical}});
}

}  // namespace
}  // namespace ddp::comm::tcp
