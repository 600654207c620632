#pragma once
// Runs every op of a TcpProcessGroup once and checks the result against a local reference.
// Called by every rank (threads or processes); throws std::runtime_error / ddp::Error.
#include "comm/tcp/tcp_process_group.h"
#include "tcp_values.h"

namespace ddp::comm::tcp::testing {

// Fills `b` with rank r's values for op, all_reduces it and checks every element.
inline void check_all_reduce_in(ProcessGroup& pg, int r, const Buffer& b, ReduceOp op) {
  for (size_t i = 0; i < b.count; ++i) put(b.dtype, b.data, i, value(b.dtype, op, r, i));
  pg.all_reduce(b, {op})->wait();
  check_oracle(b.dtype, op, pg.size(), 0, b.count);
  const std::string what = std::string("all_reduce ") + to_string(op) + " n=" + std::to_string(b.count);
  for (size_t i = 0; i < b.count; ++i)
    expect_at(what, b.dtype, b.data, i, reference(op, b.dtype, pg.size(), i));
}

inline void check_all_reduce(ProcessGroup& pg, int r, DType t, ReduceOp op, size_t n) {
  auto f = filled(t, n);
  check_all_reduce_in(pg, r, f.buffer(), op);
}

inline void check_rooted(ProcessGroup& pg, int r, DType t, size_t n) {
  const int w = pg.size();
  const std::string sz = " n=" + std::to_string(n);
  {  // broadcast from the last rank
    const int root = w - 1;
    auto b = filled(t, n);
    for (size_t i = 0; i < n; ++i) put(t, b.bytes.data(), i, value(t, ReduceOp::kSum, r, i));
    pg.broadcast(b.buffer(), {root})->wait();
    for (size_t i = 0; i < n; ++i)
      expect_at("broadcast" + sz, t, b.bytes.data(), i, value(t, ReduceOp::kSum, root, i));
  }
  {  // reduce to rank 0: the root holds the sum, the others keep their input
    auto b = filled(t, n);
    for (size_t i = 0; i < n; ++i) put(t, b.bytes.data(), i, value(t, ReduceOp::kSum, r, i));
    pg.reduce(b.buffer(), {0, ReduceOp::kSum})->wait();
    for (size_t i = 0; i < n; ++i) {
      expect_at("reduce" + sz, t, b.bytes.data(), i,
                r == 0 ? reference(ReduceOp::kSum, t, w, i) : value(t, ReduceOp::kSum, r, i));
    }
  }
  {  // gather to the last rank; scatter from rank 0
    const int root = w - 1;
    auto in = filled(t, n);
    for (size_t i = 0; i < n; ++i) put(t, in.bytes.data(), i, value(t, ReduceOp::kSum, r, i));
    auto out = filled(t, r == root ? n * static_cast<size_t>(w) : 0);
    pg.gather(in.buffer(), out.buffer(), {root})->wait();
    for (size_t k = 0; r == root && k < n * static_cast<size_t>(w); ++k) {
      expect_at("gather" + sz, t, out.bytes.data(), k,
                value(t, ReduceOp::kSum, static_cast<int>(k / n), k % n));
    }
    auto src = filled(t, r == 0 ? n * static_cast<size_t>(w) : 0);
    for (size_t k = 0; r == 0 && k < n * static_cast<size_t>(w); ++k) {
      put(t, src.bytes.data(), k, value(t, ReduceOp::kSum, static_cast<int>(k / n), k % n));
    }
    auto dst = filled(t, n);
    pg.scatter(src.buffer(), dst.buffer(), {0})->wait();
    for (size_t i = 0; i < n; ++i)
      expect_at("scatter" + sz, t, dst.bytes.data(), i, value(t, ReduceOp::kSum, r, i));
  }
}

inline void check_all_gather(ProcessGroup& pg, int r, DType t, size_t n) {
  const size_t total = n * static_cast<size_t>(pg.size());
  auto in = filled(t, n);
  for (size_t i = 0; i < n; ++i) put(t, in.bytes.data(), i, value(t, ReduceOp::kSum, r, i));
  auto out = filled(t, total);
  pg.all_gather(in.buffer(), out.buffer())->wait();
  for (size_t k = 0; k < total; ++k) {
    expect_at("all_gather n=" + std::to_string(n), t, out.bytes.data(), k,
              value(t, ReduceOp::kSum, static_cast<int>(k / n), k % n));
  }
}

inline void check_all_to_all_family(ProcessGroup& pg, int r, DType t, size_t n) {
  const int w = pg.size();
  const size_t total = n * static_cast<size_t>(w);
  const std::string sz = " n=" + std::to_string(n);
  check_all_gather(pg, r, t, n);
  {
    auto in = filled(t, total);
    for (size_t k = 0; k < total; ++k) put(t, in.bytes.data(), k, value(t, ReduceOp::kSum, r, k));
    auto out = filled(t, n);
    pg.reduce_scatter(in.buffer(), out.buffer(), {ReduceOp::kSum})->wait();
    check_oracle(t, ReduceOp::kSum, w, static_cast<size_t>(r) * n, n);
    for (size_t i = 0; i < n; ++i) {
      expect_at("reduce_scatter" + sz, t, out.bytes.data(), i,
                reference(ReduceOp::kSum, t, w, static_cast<size_t>(r) * n + i));
    }
  }
  {
    auto in = filled(t, total);
    for (size_t k = 0; k < total; ++k)
      put(t, in.bytes.data(), k, value(t, ReduceOp::kSum, r * 7 + static_cast<int>(k / n), k % n));
    auto out = filled(t, total);
    pg.all_to_all(in.buffer(), out.buffer())->wait();
    for (size_t k = 0; k < total; ++k) {
      expect_at("all_to_all" + sz, t, out.bytes.data(), k,
                value(t, ReduceOp::kSum, static_cast<int>(k / n) * 7 + r, k % n));
    }
  }
}

inline void check_p2p(ProcessGroup& pg, int r, DType t, size_t n) {
  const int w = pg.size();
  if (w == 1) return;
  auto out = filled(t, n);
  for (size_t i = 0; i < n; ++i) put(t, out.bytes.data(), i, value(t, ReduceOp::kSum, r, i));
  auto in = filled(t, n);
  // Post the recv first on every rank: isend/irecv semantics must not deadlock.
  auto rw = pg.recv(in.buffer(), (r + w - 1) % w, {7});
  auto sw = pg.send(out.buffer(), (r + 1) % w, {7});
  sw->wait();
  rw->wait();
  for (size_t i = 0; i < n; ++i)
    expect_at("send/recv", t, in.bytes.data(), i, value(t, ReduceOp::kSum, (r + w - 1) % w, i));
}

// Everything once for one dtype and size.
inline void check_everything(ProcessGroup& pg, int r, DType t, size_t n) {
  check_all_reduce(pg, r, t, ReduceOp::kSum, n);
  check_rooted(pg, r, t, n);
  check_all_to_all_family(pg, r, t, n);
  check_p2p(pg, r, t, n);
  pg.barrier()->wait();
}

}  // namespace ddp::comm::tcp::testing
