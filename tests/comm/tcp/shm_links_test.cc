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
#include "rendezvous/hash_store.h"

namespace ddp::comm::tcp {
namespace {

struct Rank {
  ShmLinks& links;
  int rank;
  OpContext ctx;
};

// `world` threads, each a rank with its own ShmLinks over one store; errors rethrown.
void run_ranks(int world, ShmLinks::Options o, const std::function<void(Rank&)>& body,
               Millis timeout = Millis(30'000)) {
  auto store = std::make_shared<rdzv::HashStore>();
  std::vector<std::exception_ptr> errors(static_cast<size_t>(world));
  std::vector<std::thread> threads;
  for (int r = 0; r < world; ++r) {
    threads.emplace_back([&, r] {
      try {
        GroupHealth health;
        health.init(world);
        ShmLinks::Options mine = o;
        mine.rank = r;
        mine.world = world;
        ShmLinks links(store, mine, &health);
        Rank rank{links, r, {}};
        rank.ctx.desc.kind = OpKind::kAllReduce;
        rank.ctx.timeout = timeout;
        rank.ctx.deadline = Deadline(timeout);
        body(rank);
      } catch (...) {
        errors[static_cast<size_t>(r)] = std::current_exception();
      }
    });
  }
  for (auto& t : threads) t.join();
  for (auto& e : errors) {
    if (e) std::rethrow_exception(e);
  }
}

// Assertions in the ranks' threads throw (doctest's are for the test's own thread).
void expect(bool ok, const std::string& what) {
  if (!ok) throw std::runtime_error(what);
}

// The message of the `E` that `f` throws; anything else fails.
template <typename E, typename F>
std::string error_of(F f) {
  try {
    f();
  } catch (const E& e) {
    return e.what();
  }
  throw std::runtime_error("no error thrown");
}

ShmLinks::Options small_fifos() {
  ShmLinks::Options o;
  o.fifo_bytes = 4096;
  o.chunk_bytes = 1024;
  return o;
}

TEST_CASE("ShmLinks: a message larger than the FIFO streams through it; one before its receive waits") {
  run_ranks(2, small_fifos(), [](Rank& r) {
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
  run_ranks(2, small_fifos(), [](Rank& r) {
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
      3, small_fifos(),
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
  using Algo = void (*)(ByteTransport&, ByteScratch&, const OpContext&, const Buffer&);
  for (Algo algo : {&direct_all_reduce, &ring_all_reduce, &hd_all_reduce}) {
    for (int world : {2, 3, 4, 5}) {
      CAPTURE(world);
      run_ranks(world, small_fifos(), [&](Rank& r) {
        ByteScratch scratch;
        for (size_t n : {size_t{7}, size_t{1000}, size_t{70'001}}) {
          std::vector<int32_t> v(n);
          for (size_t i = 0; i < n; ++i) v[i] = static_cast<int32_t>(i * 3 + static_cast<size_t>(r.rank));
          r.ctx.desc.rop = ReduceOp::kSum;
          algo(r.links, scratch, r.ctx, Buffer{v.data(), n, DType::kInt32, {}});
          for (size_t i = 0; i < n; ++i) {
            const auto want = static_cast<int32_t>(i * 3 * static_cast<size_t>(world) +
                                                   static_cast<size_t>(world * (world - 1) / 2));
            expect(v[i] == want, detail::str("rank ", r.rank, ": element ", i, " of ", n, " is ", v[i], ", not ", want));
          }
        }
      });
    }
  }
}

}  // namespace
}  // namespace ddp::comm::tcp
