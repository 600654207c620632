#include "bench/collective_timing.h"

#include <algorithm>
#include <chrono>
#include <cstdint>

#include "bench/bench.h"
#include "bench/collective_check.h"

namespace ddp::bench {
namespace {

// One size's buffers on this rank, with host copies for filling and checking.
class OpBuffers {
 public:
  OpBuffers(const OpShape& s, const BufferOptions& memory)
      : shape_(s), in_(s.in_count(), memory), out_(std::max<size_t>(s.out_count(), 1), memory) {}

  // Fresh inputs (and a cleared output) in the buffers the op reads.
  void refill() {
    fill_inputs(shape_, in_h_, out_h_);
    in_.upload(in_h_);
    if (shape_.out_count() > 0) out_.upload(out_h_);
  }
  // Every element of the last op's result.
  std::string check_full() {
    in_.download(in_h_);
    if (shape_.out_count() > 0) out_.download(out_h_);
    return bench::check_full(shape_, in_h_, out_h_);
  }
  float* in() { return in_.data(); }
  float* out() { return out_.data(); }

 private:
  OpShape shape_;
  BenchBuffer in_, out_;
  std::vector<float> in_h_, out_h_;
};

// Runs `n` ops back to back starting at op number `k0`; returns this rank's seconds. With
// `sampled` (host buffers) every op is checked, and the first wrong one is kept in `error`.
double run_loop(CollectiveRunner& r, CollOp op, size_t count, OpBuffers& b, SampledCheck* sampled, size_t k0,
                int n, std::string& error, size_t corrupt_at) {
  const auto t0 = Clock::now();
  for (int i = 0; i < n; ++i) {
    const size_t k = k0 + static_cast<size_t>(i);
    if (sampled) sampled->prepare(k, b.in(), b.out());
    r.run(op, b.in(), b.out(), count);
    if (k == corrupt_at && sampled) sampled->corrupt(k, b.in(), b.out());
    if (sampled && error.empty()) error = sampled->check(k, b.in(), b.out());
  }
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

// One fresh op, fully checked on this rank; true when every rank was right.
bool checked_op(CollectiveRunner& r, CollOp op, size_t count, OpBuffers& b, std::string& error) {
  b.refill();
  r.run(op, b.in(), b.out(), count);
  std::string e = b.check_full();
  if (error.empty()) error = e;
  double wrong = error.empty() ? 0 : 1;
  r.max_over_ranks(&wrong, 1);
  return wrong == 0;
}

}  // namespace

SizeResult measure_size(CollectiveRunner& r, CollOp op, size_t count, const TimingOptions& o) {
  const OpShape shape{op, r.rank(), r.size(), count};
  // Sampled checks need host buffers (device memory is checked whole, once per repeat).
  const bool sampling = o.memory.kind != MemoryKind::kCuda;
  BufferOptions memory = o.memory;
  if (memory.kind == MemoryKind::kGroup) memory.group = [&r](size_t bytes) { return r.allocate(bytes); };
  OpBuffers b(shape, memory);
  SampledCheck sampler(shape);
  SampledCheck* sampled = sampling ? &sampler : nullptr;
  SizeResult res;
  size_t k = 0;
  const size_t corrupt_at =
      injects_wrong_result(shape, o.corrupt_rank) ? static_cast<size_t>(o.warmup) + 2 : SIZE_MAX;
  b.refill();
  run_loop(r, op, count, b, sampled, k, o.warmup, res.error, corrupt_at);
  k += static_cast<size_t>(o.warmup);
  for (int rep = 0; rep < o.repeats; ++rep) {
    b.refill();
    r.barrier();
    const double secs = run_loop(r, op, count, b, sampled, k, o.iters, res.error, corrupt_at);
    k += static_cast<size_t>(o.iters);
    double v[2] = {secs * 1e6 / o.iters, res.error.empty() ? 0.0 : 1.0};
    r.max_over_ranks(v, 2);
    res.per_op_us.push_back(v[0]);
    if (v[1] != 0) res.wrong = true;
    if (!sampling && !res.wrong) res.wrong = !checked_op(r, op, count, b, res.error);
    if (res.wrong) return res;
  }
  res.wrong = !checked_op(r, op, count, b, res.error);
  return res;
}

}  // namespace ddp::bench
