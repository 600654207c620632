#pragma once
// Ranks as threads of one process, for the ByteTransport tests (shm_links_test.cc,
// routed_links_test.cc): assertions in a rank's thread throw (doctest's are for the test's own
// thread), and the first rank's error is rethrown by the test.
#include <exception>
#include <functional>
#include <stdexcept>
#include <string>
#include <vector>

#include "comm/tcp/byte_all_reduce.h"
#include "comm/tcp/shm_links.h"
#include "common/error.h"
#include "rendezvous/hash_store.h"
#include "tests/comm/tcp/shm_test_util.h"

namespace ddp::comm::tcp::testing {

// body(rank) on `world` threads; the first rank's error rethrown.
inline void run_threads(int world, const std::function<void(int)>& body) {
  for (const auto& e : run_ranks(world, body)) {
    if (e) std::rethrow_exception(e);
  }
}

inline void expect(bool ok, const std::string& what) {
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

inline OpContext all_reduce_context(Millis timeout) {
  OpContext ctx;
  ctx.desc.kind = OpKind::kAllReduce;
  ctx.desc.rop = ReduceOp::kSum;
  ctx.timeout = timeout;
  ctx.deadline = Deadline(timeout);
  return ctx;
}

using ByteAllReduce = void (*)(ByteTransport&, ByteScratch&, const OpContext&, const Buffer&);
inline constexpr ByteAllReduce kByteAllReduces[] = {&direct_all_reduce, &ring_all_reduce, &hd_all_reduce};

// Sums of int32 values, exact, for buffers smaller than, about and larger than the ranks' FIFOs.
inline void check_sums(ByteAllReduce algo, ByteTransport& t, const OpContext& ctx) {
  ByteScratch scratch;
  const auto w = static_cast<size_t>(t.world());
  for (size_t n : {size_t{7}, size_t{1000}, size_t{70'001}}) {
    std::vector<int32_t> v(n);
    for (size_t i = 0; i < n; ++i) v[i] = static_cast<int32_t>(i * 3 + static_cast<size_t>(t.rank()));
    algo(t, scratch, ctx, Buffer{v.data(), n, DType::kInt32, {}});
    for (size_t i = 0; i < n; ++i) {
      const auto want = static_cast<int32_t>(i * 3 * w + w * (w - 1) / 2);
      expect(v[i] == want,
             detail::str("rank ", t.rank(), ": element ", i, " of ", n, " is ", v[i], ", not ", want));
    }
  }
}

// Small FIFOs, so that a message streams through one in many pieces.
inline ShmLinks::Options small_fifos(int rank, int world) {
  ShmLinks::Options o;
  o.rank = rank;
  o.world = world;
  o.fifo_bytes = 4096;
  o.chunk_bytes = 1024;
  return o;
}

}  // namespace ddp::comm::tcp::testing
