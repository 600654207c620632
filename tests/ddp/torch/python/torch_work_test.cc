// TorchWork: a c10d::Work and its future follow our Works.
#include <ATen/Functions.h>
#include <doctest/doctest.h>

#include <stdexcept>

#include "common/error.h"
#include "ddp/torch/python/torch_work.h"

using ddp::torch::TorchWork;

TEST_CASE("completes when the last of our Works does, then runs on_success, then the future") {
  at::Tensor out = at::zeros({3});
  auto work = c10::make_intrusive<TorchWork>(0, c10d::OpType::ALLREDUCE, std::vector<at::Tensor>{out});
  auto a = std::make_shared<ddp::comm::Work>("a");
  auto b = std::make_shared<ddp::comm::Work>("b");
  int ran = 0;
  TorchWork::track(work, {a, b}, [&] {
    ++ran;
    out.fill_(7);
  });
  a->finish();
  CHECK_FALSE(work->isCompleted());
  b->finish();
  CHECK(work->isCompleted());
  CHECK(work->wait());
  CHECK(ran == 1);
  auto future = work->getFuture();
  REQUIRE(future->completed());
  CHECK(at::equal(future->value().toTensorVector().at(0), at::full({3}, 7.0)));
  CHECK(work->result().size() == 1);
}

TEST_CASE("the first error of our Works fails the c10d Work and its future; on_success does not run") {
  auto work = c10::make_intrusive<TorchWork>(0, c10d::OpType::ALLREDUCE, std::vector<at::Tensor>{});
  auto a = std::make_shared<ddp::comm::Work>("a");
  bool ran = false;
  TorchWork::track(work, {a}, [&] { ran = true; });
  a->finish(std::make_exception_ptr(ddp::NetworkError("rank 1 was lost", __FILE__, __LINE__)));
  CHECK_THROWS_WITH_AS(work->wait(), doctest::Contains("rank 1 was lost"), ddp::NetworkError);
  CHECK_FALSE(ran);
  CHECK(work->getFuture()->hasError());
}

TEST_CASE("an on_success that throws fails the Work instead of escaping into a backend thread") {
  auto work = c10::make_intrusive<TorchWork>(0, c10d::OpType::ALLGATHER, std::vector<at::Tensor>{});
  auto a = std::make_shared<ddp::comm::Work>("a");
  TorchWork::track(work, {a}, [] { throw std::runtime_error("copy-out failed"); });
  a->finish();
  CHECK_THROWS_WITH(work->wait(), doctest::Contains("copy-out failed"));
}

TEST_CASE("no Works: completed at once") {
  auto work = c10::make_intrusive<TorchWork>(0, c10d::OpType::BARRIER, std::vector<at::Tensor>{});
  TorchWork::track(work, {});
  CHECK(work->isCompleted());
  CHECK(work->getFuture()->completed());
}
