#include "ddp/torch/sync_batch_norm.h"

#include <doctest/doctest.h>
#include <torch/torch.h>

#include <mutex>
#include <string>
#include <vector>

#include "common/error.h"
#include "ddp/rank_threads.h"
#include "ddp/torch/distributed_data_parallel.h"
#include "torch_models.h"

using ddp::testing::run_ranks;
using torch_test::shard;
namespace nn = ::torch::nn;

namespace {

// float32 throughout; SyncBatchNorm sums in float64, LibTorch's kernel in its own order.
constexpr double kTol = 1e-5;
constexpr int64_t kPerRank = 4;
constexpr int64_t kChannels = 3;
constexpr int kWorld = 3;
constexpr int kSteps = 2;
// Uneven batches: each rank's rows of the global batch (a rank of one row: its own variance
// is zero; only the global count makes the statistics right).
const std::vector<int64_t> kRows = {2, 5, 1};

double diff(const at::Tensor& a, const at::Tensor& b) { return (a - b).abs().max().item<double>(); }

int64_t first_row(int rank) {
  int64_t first = 0;
  for (int r = 0; r < rank; ++r) first += kRows[static_cast<size_t>(r)];
  return first;
}
at::Tensor rows_of(const at::Tensor& t, int rank) {
  return t.narrow(0, first_row(rank), kRows[static_cast<size_t>(rank)]);
}

// A global batch (every rank's rows) whose ranks' parts have different statistics, so that
// per-rank statistics cannot pass for the global ones.
at::Tensor global_batch(std::vector<int64_t> tail, uint64_t seed) {
  auto gen = at::make_generator<at::CPUGeneratorImpl>(seed);
  std::vector<int64_t> shape{first_row(kWorld), kChannels};
  shape.insert(shape.end(), tail.begin(), tail.end());
  at::Tensor x = at::randn(shape, gen);
  for (int r = 1; r < kWorld; ++r) rows_of(x, r).mul_(1 + 2 * r).add_(1.5 * r);
  return x;
}

struct Step {
  at::Tensor x, upstream;  // global input, and the gradient of the loss sum(y * upstream)
};
struct Result {
  std::vector<at::Tensor> y, dx, dweight, dbias;  // per step
  at::Tensor running_mean, running_var, batches, eval_y;
};

template <typename Norm>
void set_affine(Norm& norm) {
  if (!norm->options.affine()) return;
  ::torch::NoGradGuard no_grad;
  norm->weight.copy_(at::linspace(0.5, 1.5, kChannels));
  norm->bias.copy_(at::linspace(-0.3, 0.3, kChannels));
}

// Runs `norm` on `x_of(step)` for every step, then once in eval mode on the first input.
template <typename Norm>
Result run(Norm& norm, const std::vector<Step>& steps,
           const std::function<at::Tensor(const at::Tensor&)>& part) {
  Result r;
  for (const auto& s : steps) {
    for (auto& p : norm->parameters()) p.mutable_grad() = at::Tensor();
    at::Tensor x = part(s.x).clone().requires_grad_(true);
    at::Tensor y = norm(x);
    (y * part(s.upstream)).sum().backward();
    r.y.push_back(y.detach());
    r.dx.push_back(x.grad());
    if (norm->options.affine()) {
      r.dweight.push_back(norm->weight.grad().clone());
      r.dbias.push_back(norm->bias.grad().clone());
    } else {
      r.dweight.push_back(at::zeros({kChannels}));
      r.dbias.push_back(at::zeros({kChannels}));
    }
  }
  r.running_mean = norm->running_mean.clone();
  r.running_var = norm->running_var.clone();
  r.batches = norm->num_batches_tracked.clone();
  norm->eval();
  r.eval_y = norm(part(steps[0].x)).detach();
  return r;
}

template <typename BatchNorm, size_t D>
void check_against_one_process(std::vector<int64_t> tail,
                               nn::BatchNormOptions options = nn::BatchNormOptions(kChannels)) {
  at::set_num_threads(1);
  std::vector<Step> steps;
  for (int s = 0; s < kSteps; ++s) steps.push_back({global_batch(tail, 10 + s), global_batch(tail, 20 + s)});
  const auto whole = [](const at::Tensor& t) { return t; };

  BatchNorm reference(options);
  set_affine(reference);
  const Result want = run(reference, steps, whole);

  std::vector<Result> got(kWorld);
  run_ranks(kWorld, [&](int rank, ddp::comm::ProcessGroupPtr group) {
    using Impl = ddp::torch::SyncBatchNormImpl<D>;
    nn::ModuleHolder<Impl> norm(std::make_shared<Impl>(options, group));
    set_affine(norm);
    got[rank] = run(norm, steps, [rank](const at::Tensor& t) { return rows_of(t, rank); });
  });

  for (int s = 0; s < kSteps; ++s) {
    CAPTURE(s);
    at::Tensor dweight = at::zeros({kChannels}), dbias = at::zeros({kChannels});
    for (int r = 0; r < kWorld; ++r) {
      CAPTURE(r);
      CHECK(diff(got[r].y[s], rows_of(want.y[s], r)) < kTol);
      CHECK(diff(got[r].dx[s], rows_of(want.dx[s], r)) < kTol);
      dweight += got[r].dweight[s];  // each rank's own share: DDP sums (averages) them
      dbias += got[r].dbias[s];
    }
    CHECK(diff(dweight, want.dweight[s]) < kTol * 10);  // sums over up to 100 values
    CHECK(diff(dbias, want.dbias[s]) < kTol * 10);
  }
  for (int r = 0; r < kWorld; ++r) {
    CAPTURE(r);
    CHECK(diff(got[r].running_mean, want.running_mean) < kTol);
    CHECK(diff(got[r].running_var, want.running_var) < kTol);
    CHECK(got[r].batches.template item<int64_t>() == kSteps);
    CHECK(diff(got[r].eval_y, rows_of(want.eval_y, r)) < kTol);
  }

  // Negative control: per-rank BatchNorm on the same shards is far from the reference.
  BatchNorm local(options);
  set_affine(local);
  const Result alone = run(local, steps, [](const at::Tensor& t) { return rows_of(t, 1); });
  CHECK(diff(alone.y[0], rows_of(want.y[0], 1)) > 100 * kTol);
  CHECK(diff(alone.dx[0], rows_of(want.dx[0], 1)) > 100 * kTol);
  CHECK(diff(alone.running_mean, want.running_mean) > 100 * kTol);
}

}  // namespace

TEST_CASE("3 ranks with batches of 2, 5 and 1 rows match LibTorch's BatchNorm on one process x 8 rows") {
  SUBCASE("1d, (N, C)") { check_against_one_process<nn::BatchNorm1d, 1>({}); }
  SUBCASE("1d, (N, C, L)") { check_against_one_process<nn::BatchNorm1d, 1>({5}); }
  SUBCASE("2d") { check_against_one_process<nn::BatchNorm2d, 2>({3, 4}); }
  SUBCASE("3d") { check_against_one_process<nn::BatchNorm3d, 3>({2, 3, 2}); }
  SUBCASE("2d without affine parameters, cumulative running average") {
    check_against_one_process<nn::BatchNorm2d, 2>(
        {3, 4}, nn::BatchNormOptions(kChannels).affine(false).momentum(c10::nullopt));
  }
}

namespace {

struct NetImpl : nn::Module {
  NetImpl() {
    body = register_module("body", nn::Sequential(nn::Conv2d(nn::Conv2dOptions(1, kChannels, 3)),
                                                  nn::BatchNorm2d(kChannels), nn::Functional(::torch::relu)));
    head = register_module("head", nn::Linear(kChannels * 4, 2));
  }
  at::Tensor forward(const at::Tensor& x) { return head(body->forward(x).flatten(1)); }
  nn::Sequential body{nullptr};
  nn::Linear head{nullptr};
};
TORCH_MODULE(Net);

Net seeded(uint64_t seed) {
  static std::mutex mu;
  std::lock_guard<std::mutex> lock(mu);
  ::torch::manual_seed(seed);
  Net net;
  ::torch::NoGradGuard no_grad;  // trained running statistics must survive the conversion
  net->body->ptr(1)->as<nn::BatchNorm2d>()->running_mean.fill_(0.5);
  return net;
}

}  // namespace

TEST_CASE("convert_sync_batchnorm + DDP over 3 ranks trains as one process on the whole batch") {
  at::set_num_threads(1);
  auto gen = at::make_generator<at::CPUGeneratorImpl>(3);
  std::vector<at::Tensor> xs, ys;
  for (int s = 0; s < 3; ++s) {
    xs.push_back(at::randn({kWorld * kPerRank, 1, 4, 4}, gen));
    xs.back().narrow(0, kPerRank, kPerRank).mul_(2).add_(1);
    ys.push_back(at::randint(2, {kWorld * kPerRank}, gen, at::TensorOptions().dtype(at::kLong)));
  }
  auto reference = seeded(5);
  {
    ::torch::optim::SGD opt(reference->parameters(), 0.1);
    for (size_t s = 0; s < xs.size(); ++s) {
      opt.zero_grad();
      nn::functional::cross_entropy(reference(xs[s]), ys[s]).backward();
      opt.step();
    }
  }
  std::vector<std::vector<at::Tensor>> got(kWorld);
  run_ranks(kWorld, [&](int rank, ddp::comm::ProcessGroupPtr group) {
    auto net = seeded(5);
    CHECK(ddp::torch::convert_sync_batchnorm(*net, group) == 1);
    REQUIRE(net->body->ptr(1)->as<ddp::torch::SyncBatchNorm2dImpl>() != nullptr);
    REQUIRE(net->body->named_children()["1"]->as<ddp::torch::SyncBatchNorm2dImpl>() != nullptr);
    ddp::torch::DistributedDataParallel model(net, group);
    ::torch::optim::SGD opt(model->parameters(), 0.1);
    for (size_t s = 0; s < xs.size(); ++s) {
      opt.zero_grad();
      nn::functional::cross_entropy(model(shard(xs[s], rank, kPerRank)), shard(ys[s], rank, kPerRank))
          .backward();
      opt.step();
    }
    for (const auto& b : net->buffers()) got[rank].push_back(b.clone());
    for (const auto& p : net->parameters()) got[rank].push_back(p.detach().clone());
  });
  std::vector<at::Tensor> want;
  for (const auto& b : reference->buffers()) want.push_back(b.clone());
  for (const auto& p : reference->parameters()) want.push_back(p.detach().clone());
  for (int r = 0; r < kWorld; ++r) {
    CAPTURE(r);
    REQUIRE(got[r].size() == want.size());
    for (size_t i = 0; i < want.size(); ++i) {
      CAPTURE(i);
      CHECK(diff(got[r][i].to(at::kDouble), want[i].to(at::kDouble)) < kTol);
    }
  }
}

namespace {
struct MemberNetImpl : nn::Module {
  MemberNetImpl() { norm = register_module("norm", nn::BatchNorm1d(kChannels)); }
  at::Tensor forward(const at::Tensor& x) { return norm(x); }
  nn::BatchNorm1d norm{nullptr};
};
TORCH_MODULE(MemberNet);
}  // namespace

TEST_CASE("convert_sync_batchnorm: a layer its parent also holds as a member is an error naming it") {
  run_ranks(1, [](int, ddp::comm::ProcessGroupPtr group) {
    auto outer = nn::Sequential(MemberNet());
    std::string error;
    try {
      ddp::torch::convert_sync_batchnorm(*outer, group);
    } catch (const ddp::InvalidArgument& e) {
      error = e.what();
    }
    CHECK(error.find("0.norm") != std::string::npos);
  });
}

TEST_CASE("SyncBatchNorm: wrong input rank and a one-row global batch are errors") {
  run_ranks(1, [](int, ddp::comm::ProcessGroupPtr group) {
    ddp::torch::SyncBatchNorm2d norm(nn::BatchNormOptions(kChannels), group);
    CHECK_THROWS_AS(norm(at::zeros({2, kChannels})), ddp::InvalidArgument);
    CHECK_THROWS_AS(ddp::torch::sync_batch_norm(at::zeros({1, kChannels}), {}, {}, {}, {}, 0.1, 1e-5, group),
                    ddp::InvalidArgument);
  });
}
