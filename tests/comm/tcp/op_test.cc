// op.h: OpDesc's description, Fingerprint's image and hash (the check every shared-memory op
// makes against each peer), OpContext's label and GroupHealth's first-failure rule.
#include "comm/tcp/op.h"

#include <doctest/doctest.h>

#include <set>

#include "common/error.h"

using namespace ddp;
using namespace ddp::comm;
using namespace ddp::comm::tcp;

namespace {

OpDesc all_reduce(uint64_t count, uint64_t seq) {
  return {OpKind::kAllReduce, DType::kFloat32, ReduceOp::kSum, -1, count, seq};
}

}  // namespace

TEST_CASE("describe names the op, its dtype, count, reduce op and root") {
  CHECK(describe(all_reduce(1000, 0)) == "all_reduce(float32 x 1000, sum)");
  CHECK(describe({OpKind::kBroadcast, DType::kInt8, ReduceOp::kSum, 1, 5, 0}) ==
        "broadcast(int8 x 5, root 1)");
  CHECK(describe({}) == "barrier()");
}

TEST_CASE("a fingerprint carries the op there and back") {
  const OpDesc d{OpKind::kReduce, DType::kInt64, ReduceOp::kMax, 2, 77, 9};
  const Fingerprint f = Fingerprint::of(d);
  CHECK(f.valid == 1);
  const OpDesc back = f.desc();
  CHECK(back.kind == d.kind);
  CHECK(back.dtype == d.dtype);
  CHECK(back.rop == d.rop);
  CHECK(back.root == d.root);
  CHECK(back.count == d.count);
  CHECK(back.seq == d.seq);
  CHECK(f.same_op(Fingerprint::of(d)));
  CHECK_FALSE(f.same_op(Fingerprint::of(all_reduce(77, 9))));
}

TEST_CASE("the hash is the same for the same op, never 0, and changes with every field") {
  const OpDesc base{OpKind::kAllReduce, DType::kFloat32, ReduceOp::kSum, 3, 1000, 41};
  const uint64_t h = Fingerprint::of(base).hash();
  CHECK(h == Fingerprint::of(base).hash());
  CHECK(h != 0);
  auto with = [&](auto change) {
    OpDesc d = base;
    change(d);
    return Fingerprint::of(d).hash();
  };
  CHECK(with([](OpDesc& d) { d.kind = OpKind::kReduce; }) != h);
  CHECK(with([](OpDesc& d) { d.dtype = DType::kFloat64; }) != h);
  CHECK(with([](OpDesc& d) { d.rop = ReduceOp::kMax; }) != h);
  CHECK(with([](OpDesc& d) { d.root = 4; }) != h);
  CHECK(with([](OpDesc& d) { d.root = -1; }) != h);
  CHECK(with([](OpDesc& d) { d.count = 1001; }) != h);
  CHECK(with([](OpDesc& d) { d.seq = 42; }) != h);
  CHECK(Fingerprint{}.hash() != 0);
}

TEST_CASE("neighbouring ops hash apart: counts and sequence numbers a program would use") {
  // The check trusts equal hashes, so the ops a program mixes up (off-by-one counts, the same
  // op one step later, a count that moved into the sequence number) must not collide.
  std::set<uint64_t> seen;
  size_t made = 0;
  for (uint64_t seq = 0; seq < 64; ++seq) {
    for (uint64_t count = 0; count < 256; ++count) {
      for (auto kind : {OpKind::kAllReduce, OpKind::kBroadcast, OpKind::kAllGather}) {
        seen.insert(Fingerprint::of({kind, DType::kFloat32, ReduceOp::kSum, -1, count, seq}).hash());
        ++made;
      }
    }
  }
  CHECK(seen.size() == made);
}

TEST_CASE("the op's label is built on first use and names the group") {
  const std::string group = "world";
  OpContext ctx;
  ctx.desc = all_reduce(4, 5);
  ctx.group = &group;
  CHECK(ctx.label() == "all_reduce (seq 5) on group 'world'");
  OpContext nameless;
  CHECK(nameless.label() == "barrier (seq 0) on group '?'");
}

TEST_CASE("GroupHealth keeps the first failure and throws it in the kind it was") {
  GroupHealth h;
  h.init(3);
  CHECK_FALSE(h.broken());
  CHECK_FALSE(h.departed(2));
  h.mark_departed(2);
  CHECK(h.departed(2));
  CHECK_FALSE(h.broken());  // a clean goodbye is not a failure
  h.fail(FailureKind::kNetwork, 1, "rank 1 closed its connection");
  h.fail(FailureKind::kTimeout, 2, "later, ignored");
  CHECK(h.broken());
  CHECK(h.lost_peer() == 1);
  CHECK_THROWS_WITH_AS(h.check("all_reduce (seq 3)"), doctest::Contains("all_reduce (seq 3): rank 1 closed"),
                       NetworkError);

  GroupHealth timed_out;
  timed_out.fail(FailureKind::kTimeout, -1, "waited 5 s");
  CHECK_THROWS_AS(timed_out.rethrow("x"), TimeoutError);
  GroupHealth mismatched;
  mismatched.fail(FailureKind::kMismatch, 0, "rank 0 called broadcast");
  CHECK_THROWS_WITH_AS(mismatched.rethrow("x"), doctest::Contains("mismatched collectives"), InvalidArgument);
  GroupHealth aborted;
  aborted.fail(FailureKind::kAborted, -1, "round 2 ended: changed: node 1 lost");
  aborted.fail(FailureKind::kNetwork, 1, "later, ignored");
  CHECK(aborted.kind() == FailureKind::kAborted);
  CHECK(aborted.lost_peer() == -1);
  CHECK_THROWS_WITH_AS(aborted.rethrow("recv (seq 4)"),
                       doctest::Contains("recv (seq 4): aborted: round 2 ended: changed: node 1 lost"),
                       Aborted);
}
