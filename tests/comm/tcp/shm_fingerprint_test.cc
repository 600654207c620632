// ShmFingerprints: ranks that run the same op pass; ranks that disagree get InvalidArgument
// naming both ops; ranks that entered the same op after different tickets get a BackendError
// naming both counts; disabled checks never wait nor throw.
#include "comm/tcp/shm_fingerprint.h"

#include <doctest/doctest.h>

#include "common/error.h"
#include "tests/comm/tcp/shm_test_util.h"

using namespace ddp;
using namespace ddp::comm;
using namespace ddp::comm::tcp;
using namespace ddp::comm::tcp::testing;

namespace {
// Each rank enters `descs[rank]` after `tickets[rank]` tickets (0 when not given) and verifies
// every peer.
std::vector<std::exception_ptr> enter_and_verify(const std::vector<OpDesc>& descs, bool enabled,
                                                 const std::vector<uint64_t>& tickets = {}) {
  const int w = static_cast<int>(descs.size());
  ShmRanks ranks(w);
  return run_ranks(w, [&](int r) {
    ShmWait wait(&ranks.segments[static_cast<size_t>(r)], {r, w, 50, 1000},
                 ranks.health[static_cast<size_t>(r)].get());
    ShmFingerprints fp(&ranks.segments[static_cast<size_t>(r)], &wait, r, w, enabled);
    auto ctx = context(descs[static_cast<size_t>(r)], Millis(2000));
    fp.begin(ctx, tickets.empty() ? 0 : tickets[static_cast<size_t>(r)]);
    // Then the op is entered, as ShmChannel::begin does.
    ranks.segments[static_cast<size_t>(r)].counter(r, Counter::kEntered).store(ctx.desc.seq + 1);
    fp.verify_all(ctx);
  });
}
const OpDesc kSum{OpKind::kAllReduce, DType::kFloat32, ReduceOp::kSum, -1, 100, 0};
}  // namespace

TEST_CASE("the same op on every rank passes") {
  require_no_errors(enter_and_verify({kSum, kSum, kSum}, true));
}

TEST_CASE("different ops: InvalidArgument naming both ranks' ops") {
  OpDesc other = kSum;
  other.kind = OpKind::kBroadcast;
  other.root = 1;
  auto errors = enter_and_verify({kSum, other}, true);
  REQUIRE(errors[0]);
  const std::string m = what(errors[0]);
  CHECK(m.find("mismatched collectives") != std::string::npos);
  CHECK(m.find("rank 0 called all_reduce") != std::string::npos);
  CHECK(m.find("rank 1 called broadcast") != std::string::npos);
  CHECK_THROWS_AS(std::rethrow_exception(errors[0]), InvalidArgument);
  CHECK(errors[1]);
}

TEST_CASE("a different count is a mismatch too") {
  OpDesc other = kSum;
  other.count = 101;
  auto errors = enter_and_verify({kSum, other}, true);
  CHECK(what(errors[0]).find("x 101") != std::string::npos);
}

TEST_CASE("the same op entered after the same tickets passes") {
  require_no_errors(enter_and_verify({kSum, kSum, kSum}, true, {7, 7, 7}));
}

TEST_CASE("the same op entered after different tickets: BackendError naming both counts") {
  auto errors = enter_and_verify({kSum, kSum, kSum}, true, {7, 7, 8});
  for (int r : {0, 1}) {
    REQUIRE(errors[static_cast<size_t>(r)]);
    const std::string m = what(errors[static_cast<size_t>(r)]);
    CHECK(m.find("schedules parted") != std::string::npos);
    CHECK(m.find(" after 7 tickets, rank 2 after 8") != std::string::npos);
    CHECK_THROWS_AS(std::rethrow_exception(errors[static_cast<size_t>(r)]), BackendError);
  }
  REQUIRE(errors[2]);
  CHECK(what(errors[2]).find("rank 2 entered this op after 8 tickets, rank 0 after 7") != std::string::npos);
}

TEST_CASE("disabled: different ops pass unchecked") {
  OpDesc other = kSum;
  other.kind = OpKind::kBroadcast;
  require_no_errors(enter_and_verify({kSum, other}, false));
}
