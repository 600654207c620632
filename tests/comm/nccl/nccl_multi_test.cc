// The nccl backend's multi-buffer ops on real GPUs (Skipped without one). Buffer i of rank r is
// virtual rank v = r*K + i of a clique of world × K, and every op must give exactly what the
// single-buffer op over those virtual ranks gives. One process: K = every visible device (on a
// one-GPU machine K = 1, the group's own communicator). Two ranks as threads (two GPUs or more,
// own ctest): each rank takes every other device. Then the refusals, which need a device too.
#include <doctest/doctest.h>

#include <algorithm>
#include <future>
#include <string>
#include <vector>

#include "comm/backend.h"
#include "comm/group_setup.h"
#include "comm/nccl/device_vector.h"
#include "comm/nccl/gpu.h"
#include "common/error.h"
#include "rendezvous/hash_store.h"

using namespace ddp;
using namespace ddp::comm;
using ddp::test::DeviceVector;
using ddp::test::has_gpu;
using ddp::test::setup_for;

namespace {

constexpr size_t kCount = 5;

// Virtual rank v's input at element e: distinct per rank, exact in int32 and float.
int32_t input(int v, size_t e) { return 10 * v + static_cast<int32_t>(e) + 1; }

// Inputs of the reductions whose answer could otherwise be one rank's input (docs/design.md):
// MIN/MAX take (e + 3v) mod 11 over 11 elements, distinct over v < 11 at every e, each v holding
// the largest at one e and the smallest at another; AVG takes 10 v^2 + e + 1, whose mean over
// v < n is no v's (for n < 25).
constexpr size_t kMinMaxCount = 11;
int32_t minmax_input(int v, size_t e) { return static_cast<int32_t>((e + 3 * static_cast<size_t>(v)) % 11); }
int32_t avg_input(int v, size_t e) { return 10 * v * v + static_cast<int32_t>(e) + 1; }

// One process's part: its rank, the world, and one device per buffer.
struct Share {
  int rank = 0;
  int world = 1;
  std::vector<int> devices;
  size_t k() const { return devices.size(); }
  int vrank(size_t i) const { return rank * static_cast<int>(k()) + static_cast<int>(i); }
  int vworld() const { return world * static_cast<int>(k()); }
};

template <typename T>
std::vector<DeviceVector<T>> inputs_of(const Share& s, int32_t (*fn)(int, size_t) = input,
                                       size_t count = kCount) {
  std::vector<DeviceVector<T>> out;
  for (size_t i = 0; i < s.k(); ++i) {
    std::vector<T> v(count);
    for (size_t e = 0; e < count; ++e) v[e] = static_cast<T>(fn(s.vrank(i), e));
    out.emplace_back(v, s.devices[i]);
  }
  return out;
}

template <typename T>
std::vector<Buffer> views(const std::vector<DeviceVector<T>>& arrays) {
  std::vector<Buffer> out;
  for (const auto& a : arrays) out.push_back(a.view());
  return out;
}

// Collects "rank r buffer i element e: got x, want y" lines (checked on the main thread).
struct Failures {
  std::vector<std::string> lines;
  template <typename T>
  void expect(const std::string& op, const Share& s, size_t i, const std::vector<T>& got,
              const std::vector<T>& want) {
    for (size_t e = 0; e < want.size(); ++e) {
      if (got[e] == want[e]) continue;
      lines.push_back(op + ": rank " + std::to_string(s.rank) + " buffer " + std::to_string(i) + " element " +
                      std::to_string(e) + ": got " + std::to_string(got[e]) + ", want " +
                      std::to_string(want[e]));
      return;
    }
  }
};

void check_all_reduce(ProcessGroup& pg, const Share& s, Failures& f) {
  const int n = s.vworld();
  for (ReduceOp op : {ReduceOp::kSum, ReduceOp::kMax, ReduceOp::kMin}) {
    const bool extreme = op != ReduceOp::kSum;
    const auto fn = extreme ? minmax_input : input;
    const size_t count = extreme ? kMinMaxCount : kCount;
    auto bufs = inputs_of<int32_t>(s, fn, count);
    pg.all_reduce_multi(views(bufs), {op})->wait();
    std::vector<int32_t> want(count);
    for (size_t e = 0; e < count; ++e) {
      want[e] = fn(0, e);
      for (int v = 1; v < n; ++v) {
        want[e] = op == ReduceOp::kSum   ? want[e] + fn(v, e)
                  : op == ReduceOp::kMax ? std::max(want[e], fn(v, e))
                                         : std::min(want[e], fn(v, e));
      }
    }
    for (size_t i = 0; i < s.k(); ++i)
      f.expect(std::string("all_reduce_multi ") + to_string(op), s, i, bufs[i].host(), want);
  }
  // AVG divides by world × K. NCCL may scale each input before summing: compare within 1e-5.
  auto floats = inputs_of<float>(s, avg_input);
  pg.all_reduce_multi(views(floats), {ReduceOp::kAvg})->wait();
  for (size_t i = 0; i < s.k(); ++i) {
    const std::vector<float> got = floats[i].host();
    for (size_t e = 0; e < kCount; ++e) {
      double sum = 0;
      for (int v = 0; v < n; ++v) sum += avg_input(v, e);
      const float want = static_cast<float>(sum / n);
      if (got[e] != doctest::Approx(want).epsilon(1e-5))
        f.lines.push_back("all_reduce_multi avg: rank " + std::to_string(s.rank) + " buffer " +
                          std::to_string(i) + ": got " + std::to_string(got[e]) + ", want " +
                          std::to_string(want));
    }
  }
}

void check_broadcast_and_reduce(ProcessGroup& pg, const Share& s, Failures& f) {
  const int n = s.vworld();
  const int last = static_cast<int>(s.k()) - 1;
  auto bufs = inputs_of<int32_t>(s);
  pg.broadcast_multi(views(bufs), {.root = s.world - 1, .root_index = last})->wait();
  std::vector<int32_t> want(kCount);
  for (size_t e = 0; e < kCount; ++e) want[e] = input(n - 1, e);  // virtual rank (world-1)*K + K-1
  for (size_t i = 0; i < s.k(); ++i) f.expect("broadcast_multi", s, i, bufs[i].host(), want);

  auto red = inputs_of<int32_t>(s);
  pg.reduce_multi(views(red), {.root = 0, .root_index = last, .op = ReduceOp::kSum})->wait();
  for (size_t i = 0; i < s.k(); ++i) {
    for (size_t e = 0; e < kCount; ++e) {
      int32_t sum = 0;
      for (int v = 0; v < n; ++v) sum += input(v, e);
      // Only the root's buffer `last` holds the sum; every other buffer is an input, untouched.
      want[e] = s.rank == 0 && static_cast<int>(i) == last ? sum : input(s.vrank(i), e);
    }
    f.expect("reduce_multi", s, i, red[i].host(), want);
  }
}

void check_all_gather(ProcessGroup& pg, const Share& s, Failures& f) {
  const int n = s.vworld();
  auto in = inputs_of<int32_t>(s);
  std::vector<DeviceVector<int32_t>> out;
  for (int dev : s.devices) out.emplace_back(std::vector<int32_t>(kCount * n, -1), dev);
  pg.all_gather_multi(views(in), views(out))->wait();
  std::vector<int32_t> want(kCount * n);
  for (int v = 0; v < n; ++v) {
    for (size_t e = 0; e < kCount; ++e) want[v * kCount + e] = input(v, e);  // (r*K + i) × count
  }
  for (size_t i = 0; i < s.k(); ++i) f.expect("all_gather_multi", s, i, out[i].host(), want);
}

// Every op, twice over (the second round reuses the cached clique), then a zero-length op and a
// single-buffer op on the group's own communicator, which must still be in step.
Failures run_share(ProcessGroup& pg, const Share& s) {
  Failures f;
  for (int round = 0; round < 2; ++round) {
    check_all_reduce(pg, s, f);
    check_broadcast_and_reduce(pg, s, f);
    check_all_gather(pg, s, f);
  }
  auto bufs = inputs_of<int32_t>(s);
  std::vector<Buffer> empty;
  for (const auto& b : bufs) empty.push_back(b.view().slice(0, 0));
  CHECK(pg.all_reduce_multi(empty)->wait());
  DeviceVector<int32_t> one({1}, cuda::default_device(s.rank));
  pg.all_reduce(one.view())->wait();
  f.expect("all_reduce after the multi ops", s, 0, one.host(), std::vector<int32_t>{s.world});
  return f;
}

void report(const Failures& f) {
  for (const auto& line : f.lines) FAIL_CHECK(line);
  CHECK(f.lines.empty());
}

bool two_gpus() { return has_gpu() && cuda::device_count() >= 2; }

// Rank r of two takes devices r, r+2, r+4, ...: K = devices / 2 each, none shared.
Share half(int rank) {
  Share s{rank, 2, {}};
  const int k = cuda::device_count() / 2;
  for (int j = 0; j < k; ++j) s.devices.push_back(rank + 2 * j);
  return s;
}

}  // namespace

TEST_CASE("nccl multi-buffer, world 1: K = every visible device, all four ops exact" *
          doctest::skip(!has_gpu())) {
  auto pg = make_nccl_group(setup_for(std::make_shared<rdzv::HashStore>(), 0, 1));
  Share s{0, 1, {}};
  for (int d = 0; d < cuda::device_count(); ++d) s.devices.push_back(d);
  INFO("K = ", s.k());
  report(run_share(*pg, s));
}

TEST_CASE("nccl multi-buffer, two GPUs or more: two ranks as threads, K = devices / 2 each" *
          doctest::skip(!two_gpus())) {
  auto store = std::make_shared<rdzv::HashStore>();
  auto rank_fn = [&](int r) {
    auto pg = make_nccl_group(setup_for(store, r, 2));
    return run_share(*pg, half(r));
  };
  auto other = std::async(std::launch::async, rank_fn, 1);
  report(rank_fn(0));
  report(other.get());
}

TEST_CASE("nccl multi-buffer, two GPUs or more: a rank whose list differs is named on both ranks" *
          doctest::skip(!two_gpus())) {
  auto store = std::make_shared<rdzv::HashStore>();
  std::vector<std::string> errors(2);
  std::vector<int32_t> after(2);
  auto rank_fn = [&](int r) {
    auto pg = make_nccl_group(setup_for(store, r, 2));
    auto bufs = inputs_of<int32_t>(half(r));
    std::vector<Buffer> list;
    for (const auto& b : bufs) list.push_back(b.view().slice(0, r == 1 ? kCount - 1 : kCount));
    try {
      pg->all_reduce_multi(list)->wait();
    } catch (const InvalidArgument& e) {
      errors[r] = e.what();
    }
    DeviceVector<int32_t> one({1}, cuda::default_device(r));  // the group goes on, in step
    pg->all_reduce(one.view())->wait();
    after[r] = one.host()[0];
  };
  auto other = std::async(std::launch::async, rank_fn, 1);
  rank_fn(0);
  other.get();
  for (int r = 0; r < 2; ++r) {
    CHECK_MESSAGE(errors[r].find("rank 1 has count 4 where rank 0 has 5") != std::string::npos, errors[r]);
    CHECK(after[r] == 2);
  }
}

TEST_CASE("nccl multi-buffer: host buffers, shared or missing devices and bitwise ops are InvalidArgument" *
          doctest::skip(!has_gpu())) {
  auto pg = make_nccl_group(setup_for(std::make_shared<rdzv::HashStore>(), 0, 1));
  const int dev = cuda::default_device(0);
  const int missing = cuda::device_count();
  DeviceVector<int32_t> a({1, 2}, dev), b({3, 4}, dev);
  std::vector<int32_t> host(2);
  const Buffer nowhere = cuda::device_view(a.mem.get(), 2, DType::kInt32, missing);
  using Op = doctest::Contains;

  std::vector<Buffer> with_host{a.view(), view(host.data(), 2)};
  CHECK_THROWS_WITH_AS(pg->all_reduce_multi(with_host), Op("buffer 1 is on cpu"), InvalidArgument);
  std::vector<Buffer> shared{a.view(), b.view()};
  const std::string both = "buffers 0 and 1 are both on cuda:" + std::to_string(dev);
  CHECK_THROWS_WITH_AS(pg->broadcast_multi(shared), Op(both.c_str()), InvalidArgument);
  CHECK_THROWS_WITH_AS(pg->reduce_multi(shared), Op(both.c_str()), InvalidArgument);
  std::vector<Buffer> with_missing{a.view(), nowhere};
  const std::string absent = "buffer 1 is on cuda:" + std::to_string(missing);
  CHECK_THROWS_WITH_AS(pg->all_reduce_multi(with_missing), Op(absent.c_str()), InvalidArgument);
  // A list of one must be on the group's device, as the single-buffer ops.
  CHECK_THROWS_AS(pg->all_reduce_multi(std::vector<Buffer>{nowhere}), InvalidArgument);
  CHECK_THROWS_AS(pg->all_gather_multi(std::vector<Buffer>{a.view().slice(0, 1)},
                                       std::vector<Buffer>{view(host.data(), 1)}),
                  InvalidArgument);
  CHECK_THROWS_WITH_AS(pg->all_reduce_multi(std::vector<Buffer>{a.view()}, {ReduceOp::kBand}),
                       Op("no bitwise"), InvalidArgument);
  // Nothing was issued: the group is in step.
  pg->all_reduce_multi(std::vector<Buffer>{a.view()})->wait();
  CHECK(a.host() == std::vector<int32_t>{1, 2});
}

TEST_CASE("nccl multi-buffer, two GPUs or more: an all_gather pair on two devices is InvalidArgument" *
          doctest::skip(!two_gpus())) {
  auto pg = make_nccl_group(setup_for(std::make_shared<rdzv::HashStore>(), 0, 1));
  DeviceVector<int32_t> in0({1}, 0), in1({2}, 1), out0({0, 0}, 0), out1({0, 0}, 1);
  std::vector<Buffer> in{in0.view(), in1.view()}, crossed{out1.view(), out0.view()};
  CHECK_THROWS_WITH_AS(pg->all_gather_multi(in, crossed),
                       doctest::Contains("input 0 is on cuda:0 but output 0 on cuda:1"), InvalidArgument);
}

TEST_CASE("nccl multi-buffer: a list of one runs on the group's communicator, as the single op" *
          doctest::skip(!has_gpu())) {
  auto pg = make_nccl_group(setup_for(std::make_shared<rdzv::HashStore>(), 0, 1));
  const int dev = cuda::default_device(0);
  DeviceVector<float> a({1, 2}, dev), out({0, 0}, dev);
  std::vector<Buffer> one{a.view()};
  pg->all_reduce_multi(one, {ReduceOp::kAvg})->wait();
  pg->broadcast_multi(one)->wait();
  pg->reduce_multi(one)->wait();
  pg->all_gather_multi(one, std::vector<Buffer>{out.view()})->wait();
  CHECK(a.host() == std::vector<float>{1, 2});
  CHECK(out.host() == std::vector<float>{1, 2});
}
