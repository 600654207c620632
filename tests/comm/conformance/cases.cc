#include "cases.h"

#include "common/error.h"
#include "reference.h"

namespace ddp::comm::conformance {
namespace {

constexpr DType kDTypes[] = {DType::kFloat32, DType::kFloat64, DType::kFloat16, DType::kBFloat16,
                             DType::kInt8,    DType::kUInt8,   DType::kInt32,   DType::kInt64};
constexpr ReduceOp kReduceOps[] = {ReduceOp::kSum, ReduceOp::kProduct, ReduceOp::kMin, ReduceOp::kMax,
                                   ReduceOp::kAvg, ReduceOp::kBand,    ReduceOp::kBor, ReduceOp::kBxor};
constexpr double kSentinel = 99;  // what outputs hold before the op: never a correct result

std::string check_all_reduce(ProcessGroup& pg, const Case& c) {
  Array a(c.dtype, c.count);
  fill_input(a, c.rop, pg.rank());
  pg.all_reduce(a.buffer(), {c.rop})->wait();
  if (auto f = oracle_failure(c.dtype, c.rop, pg.size(), 0, c.count); !f.empty()) return c.name() + ": " + f;
  return compare(
      a, 0, c.count, [&](size_t i) { return reduced_value(c.dtype, c.rop, pg.size(), i); }, c.name());
}

std::string check_reduce(ProcessGroup& pg, const Case& c) {
  Array a(c.dtype, c.count);
  fill_input(a, c.rop, pg.rank());
  pg.reduce(a.buffer(), {c.root, c.rop})->wait();
  if (auto f = oracle_failure(c.dtype, c.rop, pg.size(), 0, c.count); !f.empty()) return c.name() + ": " + f;
  if (pg.rank() != c.root) return "";
  return compare(
      a, 0, c.count, [&](size_t i) { return reduced_value(c.dtype, c.rop, pg.size(), i); }, c.name());
}

std::string check_broadcast(ProcessGroup& pg, const Case& c) {
  Array a(c.dtype, c.count);
  if (pg.rank() == c.root)
    fill_input(a, ReduceOp::kSum, c.root);
  else
    fill_constant(a, kSentinel);
  pg.broadcast(a.buffer(), {c.root})->wait();
  return compare(
      a, 0, c.count, [&](size_t i) { return input_value(c.dtype, ReduceOp::kSum, c.root, i); }, c.name());
}

std::string check_gathers(ProcessGroup& pg, const Case& c) {
  const size_t n = static_cast<size_t>(pg.size());
  Array in(c.dtype, c.count), out(c.dtype, c.count * n);
  fill_input(in, ReduceOp::kSum, pg.rank());
  fill_constant(out, kSentinel);
  if (c.op == Op::kAllGather) {
    pg.all_gather(in.buffer(), out.buffer())->wait();
  } else {
    pg.gather(in.buffer(), out.buffer(), {c.root})->wait();
    if (pg.rank() != c.root) return "";
  }
  std::string err;
  for (size_t r = 0; r < n && err.empty(); ++r) {
    err = compare(
        out, r * c.count, c.count,
        [&](size_t i) { return input_value(c.dtype, ReduceOp::kSum, static_cast<int>(r), i); },
        c.name() + " from rank " + std::to_string(r));
  }
  return err;
}

std::string check_scatter(ProcessGroup& pg, const Case& c) {
  const size_t n = static_cast<size_t>(pg.size());
  Array in(c.dtype, c.count * n), out(c.dtype, c.count);
  fill_constant(out, kSentinel);
  if (pg.rank() == c.root) {
    for (size_t r = 0; r < n; ++r) {
      for (size_t i = 0; i < c.count; ++i)
        in.set(r * c.count + i, input_value(c.dtype, ReduceOp::kSum, static_cast<int>(r), i));
    }
  }
  pg.scatter(in.buffer(), out.buffer(), {c.root})->wait();
  return compare(
      out, 0, c.count, [&](size_t i) { return input_value(c.dtype, ReduceOp::kSum, pg.rank(), i); },
      c.name());
}

std::string check_reduce_scatter(ProcessGroup& pg, const Case& c) {
  const size_t n = static_cast<size_t>(pg.size());
  Array in(c.dtype, c.count * n), out(c.dtype, c.count);
  fill_input(in, c.rop, pg.rank());
  fill_constant(out, kSentinel);
  pg.reduce_scatter(in.buffer(), out.buffer(), {c.rop})->wait();
  const size_t first = static_cast<size_t>(pg.rank()) * c.count;
  if (auto f = oracle_failure(c.dtype, c.rop, pg.size(), first, c.count); !f.empty())
    return c.name() + ": " + f;
  return compare(
      out, 0, c.count, [&](size_t i) { return reduced_value(c.dtype, c.rop, pg.size(), first + i); },
      c.name());
}

std::string check_all_to_all(ProcessGroup& pg, const Case& c) {
  const size_t n = static_cast<size_t>(pg.size());
  Array in(c.dtype, c.count * n), out(c.dtype, c.count * n);
  fill_input(in, ReduceOp::kSum, pg.rank());  // in[d * count + i] goes to rank d
  fill_constant(out, kSentinel);
  pg.all_to_all(in.buffer(), out.buffer())->wait();
  std::string err;
  const size_t mine = static_cast<size_t>(pg.rank()) * c.count;
  for (size_t s = 0; s < n && err.empty(); ++s) {
    err = compare(
        out, s * c.count, c.count,
        [&](size_t i) { return input_value(c.dtype, ReduceOp::kSum, static_cast<int>(s), mine + i); },
        c.name() + " from rank " + std::to_string(s));
  }
  return err;
}

// A ring of isend/irecv: every rank sends to the next and receives from the previous.
std::string check_send_recv(ProcessGroup& pg, const Case& c, int tag) {
  const int n = pg.size();
  if (n == 1) return "";
  const int next = (pg.rank() + 1) % n, prev = (pg.rank() + n - 1) % n;
  Array out(c.dtype, c.count), in(c.dtype, c.count);
  fill_input(out, ReduceOp::kSum, pg.rank());
  fill_constant(in, kSentinel);
  auto r = pg.recv(in.buffer(), prev, {tag});
  auto s = pg.send(out.buffer(), next, {tag});
  wait_all({s, r});
  return compare(
      in, 0, c.count, [&](size_t i) { return input_value(c.dtype, ReduceOp::kSum, prev, i); }, c.name());
}

}  // namespace

const char* to_string(Op op) {
  switch (op) {
    case Op::kAllReduce: return "all_reduce";
    case Op::kReduce: return "reduce";
    case Op::kBroadcast: return "broadcast";
    case Op::kAllGather: return "all_gather";
    case Op::kGather: return "gather";
    case Op::kScatter: return "scatter";
    case Op::kReduceScatter: return "reduce_scatter";
    case Op::kAllToAll: return "all_to_all";
    case Op::kSendRecv: return "send/recv";
    case Op::kBarrier: return "barrier";
  }
  return "?";
}

std::string Case::name() const {
  std::string s = std::string(to_string(op)) + "(" + comm::to_string(dtype);
  if (op == Op::kAllReduce || op == Op::kReduce || op == Op::kReduceScatter)
    s += std::string(", ") + comm::to_string(rop);
  s += ", count " + std::to_string(count);
  if (op == Op::kReduce || op == Op::kBroadcast || op == Op::kGather || op == Op::kScatter)
    s += ", root " + std::to_string(root);
  return s + ")";
}

std::vector<Case> full_matrix(int world, const std::vector<size_t>& counts) {
  std::vector<Case> out;
  int next_root = 0;
  auto root = [&] { return next_root++ % world; };
  for (size_t count : counts) {
    for (DType d : kDTypes) {
      for (Op op : {Op::kAllReduce, Op::kReduce, Op::kReduceScatter}) {
        for (ReduceOp r : kReduceOps) {
          if (is_bitwise(r) && !is_integer(d)) continue;
          out.push_back({op, d, r, count, op == Op::kReduce ? root() : 0});
        }
      }
      for (Op op :
           {Op::kBroadcast, Op::kAllGather, Op::kGather, Op::kScatter, Op::kAllToAll, Op::kSendRecv}) {
        out.push_back({op, d, ReduceOp::kSum, count, root()});
      }
    }
  }
  out.push_back({Op::kBarrier, DType::kFloat32, ReduceOp::kSum, 0, 0});
  return out;
}

std::vector<Case> large_matrix(int world, size_t count) {
  return {
      {Op::kAllReduce, DType::kFloat32, ReduceOp::kSum, count, 0},
      {Op::kAllReduce, DType::kInt64, ReduceOp::kMax, count, 0},
      {Op::kBroadcast, DType::kFloat32, ReduceOp::kSum, count, world - 1},
      {Op::kAllGather, DType::kFloat32, ReduceOp::kSum, count, 0},
      {Op::kReduceScatter, DType::kFloat32, ReduceOp::kSum, count, 0},
  };
}

std::string run_case(ProcessGroup& pg, const Case& c, int tag) {
  switch (c.op) {
    case Op::kAllReduce: return check_all_reduce(pg, c);
    case Op::kReduce: return check_reduce(pg, c);
    case Op::kBroadcast: return check_broadcast(pg, c);
    case Op::kAllGather:
    case Op::kGather: return check_gathers(pg, c);
    case Op::kScatter: return check_scatter(pg, c);
    case Op::kReduceScatter: return check_reduce_scatter(pg, c);
    case Op::kAllToAll: return check_all_to_all(pg, c);
    case Op::kSendRecv: return check_send_recv(pg, c, tag);
    case Op::kBarrier: pg.barrier()->wait(); return "";
  }
  return "unknown op";
}

std::vector<std::string> run_cases(ProcessGroup& pg, const std::vector<Case>& cases, size_t max_failures) {
  std::vector<std::string> failures;
  const std::string who = "rank " + std::to_string(pg.rank()) + "/" + std::to_string(pg.size()) + ": ";
  for (size_t k = 0; k < cases.size() && failures.size() < max_failures; ++k) {
    ArrayArena::reset();  // (group memory, where a test set an arena: each case from its start)
    try {
      std::string err = run_case(pg, cases[k], static_cast<int>(k % 1000));
      if (!err.empty()) failures.push_back(who + err);
    } catch (const std::exception& e) {
      failures.push_back(who + cases[k].name() + " threw: " + e.what());
      // The group is unusable after these; every later case would only repeat the news.
      if (dynamic_cast<const NetworkError*>(&e) || dynamic_cast<const TimeoutError*>(&e)) break;
    }
  }
  return failures;
}

}  // namespace ddp::comm::conformance
