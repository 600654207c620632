// reduce_scatter and all_gather in place in group memory, through TcpProcessGroup with threads
// as ranks: every dtype and reduce op, in place and into (from) plain memory, worlds 2 and 3,
// the fall-back when one rank's buffer is elsewhere, and a peer that never comes.
#include "comm/tcp/shm_exchange_direct.h"

#include <doctest/doctest.h>

#include "comm/tcp/tcp_process_group.h"
#include "common/error.h"
#include "tcp_ops_check.h"
#include "tcp_test_util.h"
#include "tcp_values.h"

using namespace ddp;
using namespace ddp::comm;
using namespace ddp::comm::tcp;
using namespace ddp::comm::tcp::testing;

namespace {

// reduce_scatter of `whole` (rank r's values for op) into `block`, checked; then all_gather of
// `block` back into `whole`, checked: every rank's reduced block, in rank order.
void check_exchange(ProcessGroup& pg, int r, const Buffer& whole, const Buffer& block, ReduceOp op) {
  const size_t n = block.count, mine = static_cast<size_t>(r) * n;
  const DType t = whole.dtype;
  for (size_t k = 0; k < whole.count; ++k) put(t, whole.data, k, value(t, op, r, k));
  pg.reduce_scatter(whole, block, {op})->wait();
  check_oracle(t, op, pg.size(), mine, n);
  const std::string what = std::string(" ") + to_string(op) + " " + to_string(t) + " n=" + std::to_string(n);
  for (size_t i = 0; i < n; ++i)
    expect_at("reduce_scatter" + what, t, block.data, i, reference(op, t, pg.size(), mine + i));
  if (block.data != static_cast<char*>(whole.data) + mine * dtype_size(t)) {
    for (size_t k = 0; k < whole.count; ++k)
      put(t, whole.data, k, -1);  // all_gather must write every element
  }
  pg.all_gather(block, whole)->wait();
  for (size_t k = 0; k < whole.count; ++k)
    expect_at("all_gather" + what, t, whole.data, k, reference(op, t, pg.size(), k));
}

}  // namespace

TEST_CASE(
    "direct reduce_scatter and all_gather: every dtype and reduce op, worlds 2 and 3, in place, exact") {
  ScopedEnv env(small_shm_geometry());
  for (int w : {2, 3}) {
    CAPTURE(w);
    run_ranks(w, [&](TcpProcessGroup& pg, int r) {
      auto mem = pg.allocate(256 << 10);
      if (!mem->shared()) throw std::runtime_error("group memory is not shared");
      uint64_t ops = 0;
      for (DType t : kAllTypes) {
        for (ReduceOp op : kAllOps) {
          if (is_bitwise(op) && !is_integer(t)) continue;
          for (size_t n : {size_t{5003}, size_t{4099}}) {  // blocks past a slot (one-shot below)
            const Buffer whole = mem->view(n * static_cast<size_t>(w), t);
            check_exchange(pg, r, whole, whole.slice(static_cast<size_t>(r) * n, n), op);
            ops += 2;
          }
        }
      }
      if (pg.direct_ops() != ops)
        throw std::runtime_error("not every reduce_scatter and all_gather ran direct");
    });
  }
}

TEST_CASE("direct reduce_scatter and all_gather: the other side in plain memory, at an offset, exact") {
  ScopedEnv env(small_shm_geometry());
  run_ranks(3, [&](TcpProcessGroup& pg, int r) {
    auto mem = pg.allocate(1 << 20);
    const size_t n = 9001;
    auto plain = filled(DType::kFloat32, n);
    for (ReduceOp op : {ReduceOp::kSum, ReduceOp::kAvg, ReduceOp::kMax})
      check_exchange(pg, r, mem->view(3 * n, DType::kFloat32, 4096 + 12), plain.buffer(), op);
    if (pg.direct_ops() != 6) throw std::runtime_error("expected 6 direct ops");
  });
}

TEST_CASE("direct reduce_scatter and all_gather: one rank's buffer elsewhere: every rank falls back, exact") {
  for (const char* cma : {"off", "on"}) {
    CAPTURE(cma);
    auto settings = small_shm_geometry();
    settings["DDP_TCP_CMA"] = std::string(cma);
    ScopedEnv env(settings);
    run_ranks(3, [&](TcpProcessGroup& pg, int r) {
      auto mem = pg.allocate(1 << 20);
      const size_t n = 9001;
      auto plain = filled(DType::kInt32, 3 * n);
      // Rank 1's in plain memory; then rank 2's at another offset.
      const Buffer a = r == 1 ? plain.buffer() : mem->view(3 * n, DType::kInt32);
      const Buffer b = mem->view(3 * n, DType::kInt32, r == 2 ? 64 : 0);
      for (const Buffer& whole : {a, b}) {
        for (int round = 0; round < 3; ++round)
          check_exchange(pg, r, whole, whole.slice(static_cast<size_t>(r) * n, n), ReduceOp::kSum);
      }
      if (pg.direct_ops() != 0) throw std::runtime_error("a mixed op ran direct");
      // Then all in group memory at one place: direct, the counters still in step.
      const Buffer whole = mem->view(3 * n, DType::kInt32);
      check_exchange(pg, r, whole, whole.slice(static_cast<size_t>(r) * n, n), ReduceOp::kSum);
      if (pg.direct_ops() != 2) throw std::runtime_error("expected 2 direct ops");
    });
  }
}

TEST_CASE(
    "direct reduce_scatter and all_gather: mixed with direct all_reduces and every other op, many rounds") {
  ScopedEnv env(small_shm_geometry());
  run_ranks(2, [&](TcpProcessGroup& pg, int r) {
    auto mem = pg.allocate(1 << 20);
    const size_t n = 7001;
    for (int round = 0; round < 10; ++round) {
      const Buffer whole = mem->view(2 * n, DType::kFloat32, static_cast<size_t>(round) * 64);
      check_exchange(pg, r, whole, whole.slice(static_cast<size_t>(r) * n, n), ReduceOp::kSum);
      for (size_t i = 0; i < whole.count; ++i)
        put(DType::kFloat32, whole.data, i, value(DType::kFloat32, ReduceOp::kSum, r, i));
      pg.all_reduce(whole, {ReduceOp::kSum})->wait();
      for (size_t i = 0; i < whole.count; ++i)
        expect_at("all_reduce", DType::kFloat32, whole.data, i,
                  reference(ReduceOp::kSum, DType::kFloat32, 2, i));
      check_everything(pg, r, DType::kFloat32, 3001);
    }
    if (pg.direct_ops() != 30) throw std::runtime_error("expected 30 direct ops");
  });
}

TEST_CASE("direct reduce_scatter and all_gather: a peer that never calls them is a TimeoutError naming it") {
  ScopedEnv env(small_shm_geometry());
  CHECK(absent_peer_named([](ProcessGroup& pg, GroupMemory& mem) {
    const Buffer whole = mem.view(8000, DType::kFloat32);
    pg.reduce_scatter(whole, whole.slice(0, 4000), {ReduceOp::kSum, Millis(300)})->wait();
  }));
  CHECK(absent_peer_named([](ProcessGroup& pg, GroupMemory& mem) {
    const Buffer whole = mem.view(8000, DType::kFloat32);
    pg.all_gather(whole.slice(0, 4000), whole, {Millis(300)})->wait();
  }));
}
