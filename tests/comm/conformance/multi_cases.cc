#include "multi_cases.h"

#include <cmath>
#include <cstdint>

#include "common/error.h"
#include "reference.h"

namespace ddp::comm::conformance {
namespace {

constexpr DType kDTypes[] = {DType::kFloat32, DType::kFloat64, DType::kFloat16, DType::kBFloat16,
                             DType::kInt8,    DType::kUInt8,   DType::kInt32,   DType::kInt64};
constexpr ReduceOp kReduceOps[] = {ReduceOp::kSum, ReduceOp::kProduct, ReduceOp::kMin, ReduceOp::kMax,
                                   ReduceOp::kAvg, ReduceOp::kBand,    ReduceOp::kBor, ReduceOp::kBxor};
constexpr int kOffsets[16] = {2, -2, 5, 2, -1, 1, -6, -4, 0, 7, 6, 5, 1, -1, 3, 5};
constexpr size_t kPeriod = 165;  // lcm of the patterns' periods (5, 3, 11)
constexpr double kSentinel = 99;

// `v` as the dtype holds it.
double rounded(DType dtype, double v) {
  Array one(dtype, 1);
  one.set(0, v);
  return one.get(0);
}

// expected(i) for i < kPeriod, then repeating.
template <typename F>
std::vector<double> period(F&& f) {
  std::vector<double> out(kPeriod);
  for (size_t i = 0; i < kPeriod; ++i) out[i] = f(i);
  return out;
}

std::vector<Array> arrays(DType dtype, size_t count, int k) {
  std::vector<Array> out;
  for (int i = 0; i < k; ++i) out.emplace_back(dtype, count);
  return out;
}

std::vector<Buffer> buffers(std::vector<Array>& a) {
  std::vector<Buffer> out;
  for (auto& x : a) out.push_back(x.buffer());
  return out;
}

void fill_multi(Array& a, ReduceOp op, int vrank) {
  const auto p = period([&](size_t i) { return multi_input(a.dtype(), op, vrank, i); });
  for (size_t i = 0; i < a.count(); ++i) a.set(i, p[i % kPeriod]);
}

std::string check_each(std::vector<Array>& a, const std::vector<double>& want, const std::string& what) {
  for (size_t b = 0; b < a.size(); ++b) {
    std::string err = compare(
        a[b], 0, a[b].count(), [&](size_t i) { return want[i % kPeriod]; },
        what + " buffer " + std::to_string(b));
    if (!err.empty()) return err;
  }
  return "";
}

std::string check_all_reduce(ProcessGroup& pg, const MultiCase& c) {
  auto a = arrays(c.dtype, c.count, c.k);
  for (int i = 0; i < c.k; ++i) fill_multi(a[i], c.rop, pg.rank() * c.k + i);
  pg.all_reduce_multi(buffers(a), {c.rop})->wait();
  const int n = pg.size() * c.k;
  return check_each(a, period([&](size_t i) { return multi_reduced(c.dtype, c.rop, n, i); }), c.name());
}

std::string check_reduce(ProcessGroup& pg, const MultiCase& c) {
  auto a = arrays(c.dtype, c.count, c.k);
  for (int i = 0; i < c.k; ++i) fill_multi(a[i], c.rop, pg.rank() * c.k + i);
  pg.reduce_multi(buffers(a), {c.root, c.root_index, c.rop})->wait();
  const int n = pg.size() * c.k;
  for (int b = 0; b < c.k; ++b) {
    const int v = pg.rank() * c.k + b;
    const bool dest = pg.rank() == c.root && b == c.root_index;
    const auto want = period([&](size_t i) {
      return dest ? multi_reduced(c.dtype, c.rop, n, i) : multi_input(c.dtype, c.rop, v, i);
    });
    std::string err = compare(
        a[b], 0, c.count, [&](size_t i) { return want[i % kPeriod]; },
        c.name() + (dest ? " root buffer " : " input buffer ") + std::to_string(b));
    if (!err.empty()) return err;
  }
  return "";
}

std::string check_broadcast(ProcessGroup& pg, const MultiCase& c) {
  auto a = arrays(c.dtype, c.count, c.k);
  const int vroot = c.root * c.k + c.root_index;
  for (int i = 0; i < c.k; ++i) {
    if (pg.rank() == c.root && i == c.root_index)
      fill_multi(a[i], ReduceOp::kSum, vroot);
    else
      fill_constant(a[i], kSentinel);
  }
  pg.broadcast_multi(buffers(a), {c.root, c.root_index})->wait();
  const auto want = period([&](size_t i) { return multi_input(c.dtype, ReduceOp::kSum, vroot, i); });
  return check_each(a, want, c.name());
}

std::string check_all_gather(ProcessGroup& pg, const MultiCase& c) {
  const int n = pg.size() * c.k;
  auto in = arrays(c.dtype, c.count, c.k);
  auto out = arrays(c.dtype, c.count * static_cast<size_t>(n), c.k);
  for (int i = 0; i < c.k; ++i) fill_multi(in[i], ReduceOp::kSum, pg.rank() * c.k + i);
  for (auto& o : out) fill_constant(o, kSentinel);
  pg.all_gather_multi(buffers(in), buffers(out))->wait();
  for (int v = 0; v < n; ++v) {
    const auto want = period([&](size_t i) { return multi_input(c.dtype, ReduceOp::kSum, v, i); });
    for (int b = 0; b < c.k; ++b) {
      const std::string what =
          c.name() + " output " + std::to_string(b) + " from virtual rank " + std::to_string(v);
      std::string err = compare(
          out[b], static_cast<size_t>(v) * c.count, c.count, [&](size_t i) { return want[i % kPeriod]; },
          what);
      if (!err.empty()) return err;
    }
  }
  return "";
}

}  // namespace

std::string MultiCase::name() const {
  static const char* const kNames[] = {"all_reduce_multi", "reduce_multi", "broadcast_multi",
                                       "all_gather_multi"};
  std::string s = std::string(kNames[static_cast<int>(op)]) + "(" + comm::to_string(dtype);
  if (op == MultiOp::kAllReduce || op == MultiOp::kReduce) s += std::string(", ") + comm::to_string(rop);
  s += ", " + std::to_string(k) + " buffers of " + std::to_string(count);
  if (op == MultiOp::kReduce || op == MultiOp::kBroadcast) {
    s += ", root " + std::to_string(root) + "[" + std::to_string(root_index) + "]";
  }
  return s + ")";
}

double multi_input(DType dtype, ReduceOp op, int vrank, size_t index) {
  if (op == ReduceOp::kProduct || op == ReduceOp::kMin || op == ReduceOp::kMax) {
    return input_value(dtype, op, vrank, index);
  }
  const double pattern = static_cast<double>((index * 7 + 3 + 2 * static_cast<size_t>(vrank)) % 5);
  const double v = pattern + kOffsets[vrank % 16];
  return dtype == DType::kUInt8 ? v + 6 : v - 2;
}

double multi_reduced(DType dtype, ReduceOp op, int n, size_t index) {
  double acc = multi_input(dtype, op, 0, index);
  auto bits = [](double v) { return static_cast<int64_t>(v); };
  for (int v = 1; v < n; ++v) {
    const double x = multi_input(dtype, op, v, index);
    switch (op) {
      case ReduceOp::kSum:
      case ReduceOp::kAvg: acc += x; break;
      case ReduceOp::kProduct: acc *= x; break;
      case ReduceOp::kMin: acc = std::min(acc, x); break;
      case ReduceOp::kMax: acc = std::max(acc, x); break;
      case ReduceOp::kBand: acc = static_cast<double>(bits(acc) & bits(x)); break;
      case ReduceOp::kBor: acc = static_cast<double>(bits(acc) | bits(x)); break;
      case ReduceOp::kBxor: acc = static_cast<double>(bits(acc) ^ bits(x)); break;
    }
  }
  if (op == ReduceOp::kAvg) acc = is_integer(dtype) ? std::trunc(acc / n) : acc / n;
  return rounded(dtype, acc);
}

std::vector<MultiCase> multi_matrix(int world, int k, const std::vector<size_t>& counts) {
  std::vector<MultiCase> out;
  int next = 0;  // rotates the root over ranks and the root index over buffers
  auto with_root = [&](MultiCase c) {
    c.root = next % world;
    c.root_index = (next / world) % k;
    ++next;
    return c;
  };
  size_t reduce_op = 0;  // reduce_multi shares all_reduce_multi's path: one reduce op per dtype, rotating
  for (size_t count : counts) {
    for (DType d : kDTypes) {
      std::vector<ReduceOp> valid;
      for (ReduceOp r : kReduceOps) {
        if (!is_bitwise(r) || is_integer(d)) valid.push_back(r);
      }
      for (ReduceOp r : valid) out.push_back({MultiOp::kAllReduce, d, r, count, k});
      out.push_back(with_root({MultiOp::kReduce, d, valid[reduce_op++ % valid.size()], count, k}));
      out.push_back(with_root({MultiOp::kBroadcast, d, ReduceOp::kSum, count, k}));
      out.push_back({MultiOp::kAllGather, d, ReduceOp::kSum, count, k});
    }
  }
  return out;
}

std::string run_multi_case(ProcessGroup& pg, const MultiCase& c) {
  switch (c.op) {
    case MultiOp::kAllReduce: return check_all_reduce(pg, c);
    case MultiOp::kReduce: return check_reduce(pg, c);
    case MultiOp::kBroadcast: return check_broadcast(pg, c);
    case MultiOp::kAllGather: return check_all_gather(pg, c);
  }
  return "unknown op";
}

std::vector<std::string> run_multi_cases(ProcessGroup& pg, const std::vector<MultiCase>& cases,
                                         size_t max_failures) {
  std::vector<std::string> failures;
  const std::string who = "rank " + std::to_string(pg.rank()) + "/" + std::to_string(pg.size()) + ": ";
  for (size_t n = 0; n < cases.size() && failures.size() < max_failures; ++n) {
    try {
      std::string err = run_multi_case(pg, cases[n]);
      if (!err.empty()) failures.push_back(who + err);
    } catch (const std::exception& e) {
      failures.push_back(who + cases[n].name() + " threw: " + e.what());
      if (dynamic_cast<const NetworkError*>(&e) || dynamic_cast<const TimeoutError*>(&e)) break;
    }
  }
  return failures;
}

}  // namespace ddp::comm::conformance
