// TorchProcessGroup's recvAnysource, monitoredBarrier, allgather_coalesced and sparse allreduce:
// threads as ranks over one c10d::HashStore, on tcp and, where built, gloo underneath.
#include <ATen/Functions.h>
#include <doctest/doctest.h>
#include <torch/csrc/distributed/c10d/HashStore.hpp>
#include <torch/csrc/distributed/c10d/PrefixStore.hpp>

#include <cstdlib>
#include <functional>
#include <set>
#include <string>
#include <thread>

#include "common/error.h"
#include "ddp/torch/python/torch_process_group.h"

using ddp::torch::PluginOptions;
using ddp::torch::TorchProcessGroup;

namespace {

void run_ranks(int world, const std::function<void(TorchProcessGroup&)>& fn) {
  auto store = c10::make_intrusive<c10d::PrefixStore>("0", c10::make_intrusive<c10d::HashStore>());
  std::vector<std::thread> threads;
  std::vector<std::string> errors(world);
  for (int r = 0; r < world; ++r) {
    threads.emplace_back([&, r] {
      try {
        PluginOptions o;
        const char* b = std::getenv("DDP_TEST_BACKEND");
        o.backend = b ? b : "tcp";
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

std::string error_of(const std::function<void()>& fn) {
  try {
    fn();
  } catch (const std::exception& e) {
    return e.what();
  }
  return "no error";
}

}  // namespace

TEST_CASE("recvAnysource takes the first message with its tag from any rank and names the sender") {
  run_ranks(3, [](TorchProcessGroup& pg) {
    const int r = pg.getRank();
    if (r == 0) {
      std::set<int> senders;
      for (int i = 0; i < 2; ++i) {
        std::vector<at::Tensor> t{filled(0)};
        auto work = pg.recvAnysource(t, 5);
        work->wait();
        const int src = work->sourceRank();
        CHECK(at::equal(t[0], filled(10 * src + 5)));  // the sender's message, not another's
        senders.insert(src);
      }
      CHECK(senders == std::set<int>{1, 2});
      std::vector<at::Tensor> t{filled(0)};
      CHECK_THROWS(pg.barrier({})->sourceRank());  // c10d's: not a recv from any source
    } else {
      std::vector<at::Tensor> five{filled(10 * r + 5)};
      pg.send(five, 0, 5)->wait();
    }
  });
}

TEST_CASE("recvAnysource leaves a message with another tag to its own recv") {
  run_ranks(2, [](TorchProcessGroup& pg) {
    if (pg.getRank() == 0) {
      std::vector<at::Tensor> t{filled(0)};
      auto work = pg.recvAnysource(t, 5);
      work->wait();
      CHECK(at::equal(t[0], filled(15)));
      pg.recv(t, 1, 9)->wait();  // tag 9 was sent first
      CHECK(at::equal(t[0], filled(19)));
    } else {
      // Both posted before either is waited for: a send may wait for its recv.
      std::vector<at::Tensor> nine{filled(19)};
      std::vector<at::Tensor> five{filled(15)};
      auto first = pg.send(nine, 0, 9);
      auto second = pg.send(five, 0, 5);
      first->wait();
      second->wait();
    }
  });
}

TEST_CASE("a recv posted for one rank takes that rank's message before a recvAnysource posted after it") {
  run_ranks(3, [](TorchProcessGroup& pg) {
    const int r = pg.getRank();
    // Both recvs are posted before rank 1 sends (the barrier): its first message is the plain
    // recv's, its second the any-source one's.
    std::vector<at::Tensor> mine{filled(0)};
    std::vector<at::Tensor> any{filled(0)};
    c10::intrusive_ptr<c10d::Work> from_one;
    c10::intrusive_ptr<c10d::Work> from_any;
    if (r == 0) {
      from_one = pg.recv(mine, 1, 7);
      from_any = pg.recvAnysource(any, 7);
    }
    pg.barrier({})->wait();
    if (r == 1) {
      std::vector<at::Tensor> first{filled(71)};
      std::vector<at::Tensor> second{filled(72)};
      auto w1 = pg.send(first, 0, 7);
      auto w2 = pg.send(second, 0, 7);
      w1->wait();
      w2->wait();
    }
    if (r == 0) {
      from_one->wait();
      from_any->wait();
      CHECK(at::equal(mine[0], filled(71)));
      CHECK(at::equal(any[0], filled(72)));
      CHECK(from_any->sourceRank() == 1);
    }
  });
}

TEST_CASE("allgather_coalesced gathers every rank's list of tensors in one op") {
  run_ranks(3, [](TorchProcessGroup& pg) {
    const int r = pg.getRank();
    std::vector<at::Tensor> in{at::full({2, 3}, r + 1.0), filled(10.0 * (r + 1)), at::zeros({0})};
    std::vector<std::vector<at::Tensor>> out(3);
    for (auto& list : out) list = {at::zeros({2, 3}), filled(0), at::zeros({0})};
    pg.allgather_coalesced(out, in, {})->wait();
    for (int k = 0; k < 3; ++k) {
      CHECK(at::equal(out[k][0], at::full({2, 3}, k + 1.0)));
      CHECK(at::equal(out[k][1], filled(10.0 * (k + 1))));
    }
    std::vector<at::Tensor> mixed{filled(1), at::zeros({4}, at::kInt)};
    std::vector<std::vector<at::Tensor>> mixed_out(3, {filled(0), at::zeros({4}, at::kInt)});
    CHECK_THROWS_AS(pg.allgather_coalesced(mixed_out, mixed, {}), ddp::InvalidArgument);
  });
}

TEST_CASE("sparse allreduce sums every rank's entries") {
  run_ranks(3, [](TorchProcessGroup& pg) {
    const int r = pg.getRank();
    // Rank r holds 1 at index r and r + 1 at index 3: the sum has 1, 1, 1, 6.
    at::Tensor indices = at::tensor({int64_t{r}, int64_t{3}}).view({1, 2});
    at::Tensor values = at::tensor({1.0F, r + 1.0F});
    std::vector<at::Tensor> t{at::sparse_coo_tensor(indices, values, {4})};
    pg.allreduce(t, {})->wait();
    CHECK(t[0].is_sparse());
    CHECK(at::equal(t[0].to_dense(), at::tensor({1.0F, 1.0F, 1.0F, 6.0F})));
    c10d::AllreduceOptions max;
    max.reduceOp = c10d::ReduceOp::MAX;
    CHECK_THROWS_AS(pg.allreduce(t, max), ddp::InvalidArgument);
  });
}

TEST_CASE("monitoredBarrier passes when every rank arrives, with and without waitAllRanks") {
  run_ranks(3, [](TorchProcessGroup& pg) {
    c10d::BarrierOptions o;
    o.timeout = std::chrono::milliseconds(20'000);
    pg.monitoredBarrier(o, false);
    pg.monitoredBarrier(o, true);
    std::vector<at::Tensor> t{filled(1)};
    pg.allreduce(t, {})->wait();  // the group still works
    CHECK(at::equal(t[0], filled(3)));
  });
}

// A late rank fails the barrier and, on gloo underneath, the group: each case ends there.
TEST_CASE("monitoredBarrier: rank 0 names the first rank that did not come; the others say so") {
  run_ranks(3, [](TorchProcessGroup& pg) {
    c10d::BarrierOptions o;
    o.timeout = std::chrono::milliseconds(500);
    if (pg.getRank() == 0) {  // rank 1 never comes
      CHECK(error_of([&] { pg.monitoredBarrier(o, false); }).find("Rank 1 failed to pass monitoredBarrier") !=
            std::string::npos);
    } else if (pg.getRank() == 2) {
      CHECK(error_of([&] {
              pg.monitoredBarrier(o, false);
            }).find("Rank 2 successfully reached monitoredBarrier, but received errors") !=
            std::string::npos);
    }
  });
}

TEST_CASE("monitoredBarrier with waitAllRanks names every late rank; a zero timeout fails at once") {
  run_ranks(3, [](TorchProcessGroup& pg) {
    c10d::BarrierOptions o;
    o.timeout = std::chrono::milliseconds(0);
    if (pg.getRank() == 0) {  // nobody else comes
      CHECK(error_of([&] { pg.monitoredBarrier(o, false); }).find("Rank 0 timed out in monitoredBarrier") !=
            std::string::npos);
      o.timeout = std::chrono::milliseconds(500);
      CHECK(error_of([&] {
              pg.monitoredBarrier(o, true);
            }).find("Ranks 1, 2 failed to pass monitoredBarrier") != std::string::npos);
    }
  });
}
