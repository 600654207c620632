// ShmLinks: messages through the shared-memory FIFOs (larger than a FIFO, before their receive,
// of the wrong size, never sent), and the all_reduce algorithms written over a ByteTransport
// running over it: the same results as over sockets (the conformance matrix runs those).
#include "comm/tcp/shm_links.h"

#include <doctest/doctest.h>

#include <atomic>
#include <functional>
#include <numeric>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "comm/tcp/byte_all_reduce.h"
#include "common/error.h"
#include "tests/comm/tcp/links_test_util.h"

namespace ddp::comm::tcp {
namespace {

using testing::error_of;
using testing::expect;

struct Rank {
  ShmLinks& links;
  int rank;
  OpContext ctx;
};

// `world` threads, each a rank with its own ShmLinks (small FIFOs) over one store.
void run_ranks(int world, const std::function<void(Rank&)>& body, Millis timeout = Millis(30'000)) {
  auto store = std::make_shared<rdzv::HashStore>();
  testing::run_threads(world, [&](int r) {
    GroupHealth health;
    health.init(world);
    ShmLinks links(store, testing::small_fifos(r, world), &health);
    Rank rank{links, r, testing::all_reduce_context(timeout)};
    body(rank);
  });
}

TEST_CASE("ShmLinks: a message larger than the FIFO streams through it; one before its receive waits") {
  run_ranks(2, [](Rank& r) {
    std::vector<uint8_t> big(100'003), small(5);
    ByteTransport::Batch b;
    if (r.rank == 0) {
      std::iota(big.begin(), big.end(), uint8_t{0});
      small = {9, 8, 7, 6, 5};
      r.links.send(b, 1, 2, small.data(), small.size(), r.ctx);  // step 2 first: posted late there
      r.links.send(b, 1, 1, big.data(), big.size(), r.ctx);
      r.links.send(b, 1, 3, nullptr, 0, r.ctx);
    } else {
      r.links.recv(b, 0, 1, big.data(), big.size(), r.ctx);
      r.links.wait(b, r.ctx);  // the step-2 message arrived first: kept aside meanwhile
      r.links.recv(b, 0, 2, small.data(), small.size(), r.ctx);
      r.links.recv(b, 0, 3, nullptr, 0, r.ctx);
    }
    r.links.wait(b, r.ctx);
    if (r.rank == 1) {
      for (size_t i = 0; i < big.size(); ++i) expect(big[i] == static_cast<uint8_t>(i), "big message wrong");
      expect(small == std::vector<uint8_t>{9, 8, 7, 6, 5}, "early message wrong");
    }
  });
}

TEST_CASE("ShmLinks: a receive of the wrong size fails naming both sizes; the next message is intact") {
  run_ranks(2, [](Rank& r) {
    std::vector<char> a(100, 'a'), b2(7, 'b');
    ByteTransport::Batch b;
    if (r.rank == 0) {
      r.links.send(b, 1, 0, a.data(), a.size(), r.ctx);
      r.links.send(b, 1, 0, b2.data(), b2.size(), r.ctx);
      r.links.wait(b, r.ctx);
      return;
    }
    std::vector<char> wrong(50), right(7);
    r.links.recv(b, 0, 0, wrong.data(), wrong.size(), r.ctx);
    r.links.recv(b, 0, 0, right.data(), right.size(), r.ctx);
    const std::string error = error_of<InvalidArgument>([&] { r.links.wait_one(b, 0, r.ctx); });
    expect(error.find("sent 100 bytes for a receive of 50") != std::string::npos, error);
    r.links.wait_one(b, 1, r.ctx);
    expect(right == b2, "the message after the wrong one");
  });
}

TEST_CASE("ShmLinks: messages never sent are a TimeoutError naming the ranks") {
  run_ranks(
      3,
      [](Rank& r) {
        if (r.rank != 0) return;
        char c[2] = {};
        ByteTransport::Batch b;
        r.links.recv(b, 2, 0, &c[0], 1, r.ctx);
        r.links.recv(b, 1, 0, &c[1], 1, r.ctx);
        const std::string error = error_of<TimeoutError>([&] { r.links.wait(b, r.ctx); });
        expect(error.find("waiting for ranks [1, 2]") != std::string::npos, error);
      },
      Millis(300));
}

TEST_CASE("ShmLinks: direct, ring and hd all_reduce over shared memory, exact, FIFOs smaller than a part") {
  for (testing::ByteAllReduce algo : testing::kByteAllReduces) {
    for (int world : {2, 3, 4, 5}) {
      CAPTURE(world);
      run_ranks(world, [&](Rank& r) { testing::check_sums(algo, r.links, r.ctx); });
    }
  }
}

}  // namespace
}  // namespace ddp::comm::tcp
