// TorchProcessGroup: threads as ranks over one c10d::HashStore, through the c10d interface
// (the same calls torch.distributed makes), on tcp and, where built, gloo underneath.
#include <ATen/Functions.h>
#include <doctest/doctest.h>
#include <torch/csrc/distributed/c10d/HashStore.hpp>
#include <torch/csrc/distributed/c10d/PrefixStore.hpp>

#include <cstdlib>
#include <functional>
#include <string>
#include <thread>

#include "common/error.h"
#include "ddp/torch/python/torch_process_group.h"

using ddp::torch::PluginOptions;
using ddp::torch::TorchProcessGroup;

namespace {

std::string backend() {
  const char* b = std::getenv("DDP_TEST_BACKEND");
  return b ? b : "tcp";
}

// Runs fn on `world` threads, each with its own TorchProcessGroup over one PyTorch store.
void run_ranks(int world, const std::function<void(TorchProcessGroup&)>& fn) {
  auto store = c10::make_intrusive<c10d::PrefixStore>("0", c10::make_intrusive<c10d::HashStore>());
  std::vector<std::thread> threads;
  std::vector<std::string> errors(world);
  for (int r = 0; r < world; ++r) {
    threads.emplace_back([&, r] {
      try {
        PluginOptions o;
        o.backend = backend();
        o.timeout = ddp::Millis(30'000);
        TorchProcessGroup pg(store, r, world, o);
        fn(pg);
      } catch (const std::exception& e) {
        errors[r] = e.what();
      }
    });
  }
  for (auto& t : threads) t.join();
  for (int r = 0; r < world; ++r) CHECK_MESSAGE(errors[r].empty(), "rank ", r, ": ", errors[r]);
}

at::Tensor filled(double v, int64_t n = 4) { return at::full({n}, v); }

}  // namespace

TEST_CASE("allreduce, broadcast and reduce through the c10d interface") {
  run_ranks(3, [](TorchProcessGroup& pg) {
    const int r = pg.getRank();
    std::vector<at::Tensor> t{filled(r + 1)};
    pg.allreduce(t, {})->wait();
    CHECK(at::equal(t[0], filled(6)));
    // MAX and MIN: rank k holds (i + 3k) mod 11, so every rank holds the answer somewhere and
    // no rank's tensor is the answer.
    auto spread = [](int k) { return at::remainder(at::arange(11, at::kFloat) + 3 * k, 11); };
    const at::Tensor all = at::stack({spread(0), spread(1), spread(2)});
    for (auto [op, want] : {std::pair{c10d::ReduceOp::MAX, std::get<0>(all.max(0))},
                            std::pair{c10d::ReduceOp::MIN, std::get<0>(all.min(0))}}) {
      c10d::AllreduceOptions o;
      o.reduceOp = op;
      t = {spread(r)};
      pg.allreduce(t, o)->wait();
      CHECK(at::equal(t[0], want));
    }
    c10d::BroadcastOptions bo;
    bo.rootRank = 2;
    t = {filled(r * 10)};
    pg.broadcast(t, bo)->wait();
    CHECK(at::equal(t[0], filled(20)));
    c10d::ReduceOptions ro;
    ro.rootRank = 1;
    t = {filled(1)};
    pg.reduce(t, ro)->wait();
    if (r == 1) CHECK(at::equal(t[0], filled(3)));
    pg.barrier({})->wait();
    CHECK(pg.getBackendName() == "ddp");
  });
}

TEST_CASE("allgather, gather, scatter, reduce_scatter and alltoall with c10d's tensor lists") {
  run_ranks(2, [](TorchProcessGroup& pg) {
    const int r = pg.getRank();
    std::vector<std::vector<at::Tensor>> outs{{filled(-1), filled(-1)}};
    std::vector<at::Tensor> in{filled(r)};
    pg.allgather(outs, in, {})->wait();
    CHECK(at::equal(outs[0][0], filled(0)));
    CHECK(at::equal(outs[0][1], filled(1)));
    std::vector<std::vector<at::Tensor>> gathered;
    if (r == 0) gathered = {{filled(-1), filled(-1)}};
    pg.gather(gathered, in, {})->wait();
    if (r == 0) {
      CHECK(at::equal(gathered[0][0], filled(0)));
      CHECK(at::equal(gathered[0][1], filled(1)));
    }
    std::vector<std::vector<at::Tensor>> pieces;
    if (r == 0) pieces = {{filled(5), filled(6)}};
    std::vector<at::Tensor> mine{filled(0)};
    pg.scatter(mine, pieces, {})->wait();
    CHECK(at::equal(mine[0], filled(5 + r)));
    std::vector<std::vector<at::Tensor>> rs_in{{filled(1), filled(2)}};
    pg.reduce_scatter(mine, rs_in, {})->wait();
    CHECK(at::equal(mine[0], filled(2 * (r + 1))));
    at::Tensor a2a_in = at::tensor({r * 10.0f, r * 10.0f + 1});
    at::Tensor a2a_out = at::zeros({2});
    std::vector<int64_t> none;
    pg.alltoall_base(a2a_out, a2a_in, none, none, {})->wait();
    CHECK(at::equal(a2a_out, at::tensor({0.0f + r, 10.0f + r})));
  });
}

TEST_CASE("alltoall_base with unequal splits, rows of several elements") {
  run_ranks(3, [](TorchProcessGroup& pg) {
    const int r = pg.getRank();
    // Rank r sends r + j + 1 rows of two elements, all equal to 10 r + j, to rank j.
    std::vector<int64_t> in_splits, out_splits;
    std::vector<at::Tensor> blocks, want;
    for (int j = 0; j < 3; ++j) {
      in_splits.push_back(r + j + 1);
      out_splits.push_back(j + r + 1);
      blocks.push_back(at::full({r + j + 1, 2}, 10.0 * r + j));
      want.push_back(at::full({j + r + 1, 2}, 10.0 * j + r));
    }
    at::Tensor input = at::cat(blocks);
    at::Tensor output = at::zeros({at::cat(want).size(0), 2});
    pg.alltoall_base(output, input, out_splits, in_splits, {})->wait();
    CHECK(at::equal(output, at::cat(want)));
  });
}

TEST_CASE("send and recv with a tag; the future carries the received tensor") {
  run_ranks(2, [](TorchProcessGroup& pg) {
    std::vector<at::Tensor> t{pg.getRank() == 0 ? filled(9) : filled(0)};
    auto work = pg.getRank() == 0 ? pg.send(t, 1, 3) : pg.recv(t, 0, 3);
    work->wait();
    auto value = work->getFuture()->value().toTensorVector();
    CHECK(at::equal(value.at(0), filled(9)));
  });
}

TEST_CASE("bad calls are InvalidArgument at the call, and the group still works after them") {
  run_ranks(2, [](TorchProcessGroup& pg) {
    std::vector<at::Tensor> two{filled(0), filled(0)};
    CHECK_THROWS_AS(pg.allreduce(two, {}), ddp::InvalidArgument);
    std::vector<std::vector<at::Tensor>> short_list{{filled(0)}};
    std::vector<at::Tensor> in{filled(0)};
    CHECK_THROWS_AS(pg.allgather(short_list, in, {}), ddp::InvalidArgument);
    at::Tensor out = at::zeros({3});
    at::Tensor inp = at::zeros({3});
    std::vector<int64_t> splits{1, 2};
    // Rank 0 sends 2 rows to rank 1, which expects 1: refused on both ranks before anything moves.
    CHECK_THROWS_WITH_AS(pg.alltoall_base(out, inp, splits, splits, {}), doctest::Contains("which expects"),
                         ddp::InvalidArgument);
    std::vector<at::Tensor> t{filled(1)};
    pg.allreduce(t, {})->wait();
    CHECK(at::equal(t[0], filled(2)));
  });
}
