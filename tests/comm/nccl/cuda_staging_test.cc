// CUDA staging over the tcp backend: two ranks (threads) sharing one GPU, which NCCL refuses.
// The groups come from the registry (create_group("tcp")), as init_process_group makes them.
#include "comm/nccl/cuda_staging.h"

#include <doctest/doctest.h>

#include <algorithm>
#include <future>
#include <vector>

#include "comm/backend.h"
#include "comm/group_setup.h"
#include "comm/nccl/cuda_memory.h"
#include "comm/nccl/gpu.h"
#include "common/error.h"
#include "rendezvous/hash_store.h"

using namespace ddp;
using namespace ddp::comm;
using ddp::test::has_gpu;

namespace {

template <typename Fn>
void two_ranks(Fn fn) {
  auto store = std::make_shared<rdzv::HashStore>();
  auto other =
      std::async(std::launch::async, [&] { fn(*create_group("tcp", test::setup_for(store, 1, 2)), 1); });
  fn(*create_group("tcp", test::setup_for(store, 0, 2)), 0);
  other.get();
}

std::vector<float> to_host(const cuda::DeviceMemory& m, size_t n) {
  std::vector<float> v(n);
  cuda::copy_to_host(v.data(), m.get(), n * sizeof(float), 0);
  return v;
}

}  // namespace

TEST_CASE("cuda staging: two ranks on one GPU all_reduce, all_gather and send/recv device buffers" *
          doctest::skip(!has_gpu())) {
  std::vector<std::vector<float>> reduced(2), gathered(2), received(2);
  two_ranks([&](ProcessGroup& pg, int r) {
    std::vector<float> init{1.0f + r, 2.0f + r};
    auto x = cuda::device_alloc(2 * sizeof(float), 0);
    auto all = cuda::device_alloc(4 * sizeof(float), 0);
    cuda::copy_to_device(x.get(), init.data(), 2 * sizeof(float), 0);
    pg.all_gather(cuda::device_view(x.get(), 2, DType::kFloat32, 0),
                  cuda::device_view(all.get(), 4, DType::kFloat32, 0))
        ->wait();
    gathered[r] = to_host(all, 4);
    pg.all_reduce(cuda::device_view(x.get(), 2, DType::kFloat32, 0))->wait();
    reduced[r] = to_host(x, 2);
    if (r == 0) {
      pg.send(cuda::device_view(x.get(), 2, DType::kFloat32, 0), 1)->wait();
    } else {
      auto in = cuda::device_alloc(2 * sizeof(float), 0);
      pg.recv(cuda::device_view(in.get(), 2, DType::kFloat32, 0), 0)->wait();
      received[r] = to_host(in, 2);
    }
  });
  for (int r = 0; r < 2; ++r) {
    CHECK(reduced[r] == std::vector<float>{3.0f, 5.0f});
    CHECK(gathered[r] == std::vector<float>{1.0f, 2.0f, 2.0f, 3.0f});
  }
  CHECK(received[1] == std::vector<float>{3.0f, 5.0f});
}

TEST_CASE("cuda staging: host buffers pass straight through; the backend name is the inner one" *
          doctest::skip(!has_gpu())) {
  std::vector<std::vector<int32_t>> out(2);
  two_ranks([&](ProcessGroup& pg, int r) {
    CHECK(pg.backend_name() == "tcp");
    out[r] = {r, 10};
    pg.all_reduce(view(out[r].data(), 2))->wait();
  });
  CHECK(out[0] == std::vector<int32_t>{1, 20});
}

// Multi-buffer ops on device lists (issue 19): every buffer staged, the host path on the copies.
TEST_CASE(
    "cuda staging: two ranks on one GPU all_reduce_multi, broadcast_multi, reduce_multi and "
    "all_gather_multi over device lists" *
    doctest::skip(!has_gpu())) {
  // reduce_multi's MAX takes its own inputs: virtual rank v holds (j + 3v) mod 11 at j, so each
  // holds the maximum somewhere and no virtual rank's buffer is the answer.
  auto spread = [](int v) {
    std::vector<float> s(11);
    for (size_t j = 0; j < s.size(); ++j) s[j] = static_cast<float>((j + 3 * static_cast<size_t>(v)) % 11);
    return s;
  };
  std::vector<std::vector<float>> reduced(2), broadcast(2), root(2), other(2), gathered(2);
  two_ranks([&](ProcessGroup& pg, int r) {
    std::vector<cuda::DeviceMemory> mem, out, spreads;
    std::vector<Buffer> list, outs, spread_list;
    for (int i = 0; i < 2; ++i) {
      const float v = static_cast<float>(2 * r + i);  // virtual rank
      std::vector<float> init{v, 10 * v};
      mem.push_back(cuda::device_alloc(2 * sizeof(float), 0));
      cuda::copy_to_device(mem.back().get(), init.data(), 2 * sizeof(float), 0);
      list.push_back(cuda::device_view(mem.back().get(), 2, DType::kFloat32, 0));
      out.push_back(cuda::device_alloc(8 * sizeof(float), 0));
      outs.push_back(cuda::device_view(out.back().get(), 8, DType::kFloat32, 0));
      const std::vector<float> s = spread(2 * r + i);
      spreads.push_back(cuda::device_alloc(11 * sizeof(float), 0));
      cuda::copy_to_device(spreads.back().get(), s.data(), 11 * sizeof(float), 0);
      spread_list.push_back(cuda::device_view(spreads.back().get(), 11, DType::kFloat32, 0));
    }
    pg.all_gather_multi(list, outs)->wait();
    gathered[r] = to_host(out[1], 8);
    pg.reduce_multi(spread_list, {.root = 1, .root_index = 1, .op = ReduceOp::kMax})->wait();
    root[r] = to_host(spreads[1], 11);
    other[r] = to_host(spreads[0], 11);
    pg.all_reduce_multi(list)->wait();
    reduced[r] = to_host(mem[0], 2);
    pg.broadcast_multi(list, {.root = 0, .root_index = 1})->wait();
    broadcast[r] = to_host(mem[1], 2);
  });
  for (int r = 0; r < 2; ++r) {
    CHECK(gathered[r] == std::vector<float>{0, 0, 1, 10, 2, 20, 3, 30});
    CHECK(reduced[r] == std::vector<float>{6, 60});  // 0+1+2+3, 0+10+20+30
    CHECK(broadcast[r] == std::vector<float>{6, 60});
  }
  std::vector<float> max = spread(0);
  for (int v = 1; v < 4; ++v) {
    const std::vector<float> s = spread(v);
    for (size_t j = 0; j < max.size(); ++j) max[j] = std::max(max[j], s[j]);
  }
  CHECK(root[1] == max);        // max over virtual ranks 0..3
  CHECK(root[0] == spread(1));  // inputs: untouched
  CHECK(other[0] == spread(0));
  CHECK(other[1] == spread(2));
}
