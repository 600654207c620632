// The engine end to end, threads as ranks: the equivalence matrix (W ranks x batch B ==
// one process x batch W*B), construction checks, unused parameters, bucket views, no_sync.
#include "ddp/engine.h"

#include <doctest/doctest.h>

#include <cmath>
#include <mutex>

#include "common/error.h"
#include "examples/dataset.h"
#include "examples/mlp.h"
#include "tests/ddp/rank_threads.h"

using namespace ddp;
using ddp::testing::run_ranks;
using example::Dataset;
using example::Mlp;
using example::Sgd;

namespace {

const std::vector<int> kSizes{8, 16, 16, 4};
constexpr int kBatch = 4;  // per rank
constexpr int kSteps = 4;
constexpr uint64_t kSeed = 7;

struct Case {
  int world;
  int micro;  // micro-batches per step; all but the last under no_sync
  double first_cap_mb;
  double cap_mb;
};

std::vector<size_t> register_mlp(Engine& engine, Mlp& m) {
  std::vector<size_t> ids;
  for (size_t l = 0; l < m.layers().size(); ++l) {
    auto& lin = m.layers()[l];
    ids.push_back(engine.register_param({"layer" + std::to_string(l) + ".weight",
                                         comm::view(lin.weight.data(), lin.weight.size()),
                                         comm::view(lin.grad_weight.data(), lin.grad_weight.size()),
                                         {lin.out, lin.in}}));
    ids.push_back(engine.register_param({"layer" + std::to_string(l) + ".bias",
                                         comm::view(lin.bias.data(), lin.bias.size()),
                                         comm::view(lin.grad_bias.data(), lin.grad_bias.size()),
                                         {}}));
  }
  return ids;
}

// First sample of rank r's micro-batch j of step s: the global micro-batch is the ranks' shards
// side by side, so the reference reads the same samples in one batch.
int64_t first_sample(const Case& c, int step, int micro, int rank) {
  return ((static_cast<int64_t>(step) * c.micro + micro) * c.world + rank) * kBatch;
}

std::vector<float> flatten(const Mlp& m) {
  std::vector<float> out;
  for (const auto& lin : m.layers()) {
    out.insert(out.end(), lin.weight.begin(), lin.weight.end());
    out.insert(out.end(), lin.bias.begin(), lin.bias.end());
  }
  return out;
}

std::vector<float> reference(const Case& c) {
  Dataset data(kSizes.front(), kSizes.back(), kSeed);
  Mlp m(kSizes, kSeed);
  Sgd sgd({0.1f, 0.9f});
  const int n = c.world * kBatch;
  std::vector<float> x(static_cast<size_t>(n) * data.dim());
  std::vector<int32_t> y(n);
  for (int s = 0; s < kSteps; ++s) {
    m.zero_grad();
    for (int j = 0; j < c.micro; ++j) {
      data.batch(first_sample(c, s, j, 0), n, x.data(), y.data());
      m.forward(x.data(), y.data(), n);
      m.backward();
    }
    sgd.step(m);
  }
  return flatten(m);
}

struct RankResult {
  std::vector<float> weights;
  BucketAssignment initial, final;
  bool rebuilt = false;
};

RankResult train_rank(const Case& c, int rank, comm::ProcessGroupPtr group, EngineOptions options,
                      const CommHook& hook = nullptr) {
  Dataset data(kSizes.front(), kSizes.back(), kSeed);
  Mlp m(kSizes, kSeed + 1000 * rank);  // different on every rank: the broadcast must fix it
  Sgd sgd({0.1f, 0.9f});
  options.first_bucket_cap_mb = c.first_cap_mb;
  options.bucket_cap_mb = c.cap_mb;
  Engine engine(group, options);
  auto ids = register_mlp(engine, m);
  if (hook) engine.register_comm_hook(hook);
  engine.finalize();
  RankResult r;
  r.initial = engine.buckets();
  std::vector<float> x(static_cast<size_t>(kBatch) * data.dim());
  std::vector<int32_t> y(kBatch);
  for (int s = 0; s < kSteps; ++s) {
    m.zero_grad();
    for (int j = 0; j < c.micro; ++j) {
      data.batch(first_sample(c, s, j, rank), kBatch, x.data(), y.data());
      const bool last = j + 1 == c.micro;
      auto step = [&] {
        engine.pre_forward();
        m.forward(x.data(), y.data(), kBatch);
        m.backward([&](size_t l) {
          engine.mark_ready(ids[2 * l]);
          engine.mark_ready(ids[2 * l + 1]);
        });
        engine.finish_backward();
      };
      if (last) {
        step();
      } else {
        auto guard = engine.no_sync();
        step();
      }
    }
    sgd.step(m);
  }
  r.weights = flatten(m);
  r.final = engine.buckets();
  r.rebuilt = engine.buckets_rebuilt();
  return r;
}

constexpr double kTolerance = 1e-4;  // of the equivalence checks, relative to 1 + |weight|

double worst_error(const std::vector<float>& got, const std::vector<float>& want) {
  REQUIRE(got.size() == want.size());
  double worst = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    worst = std::max(worst, std::abs(static_cast<double>(got[i]) - want[i]) / (1.0 + std::abs(want[i])));
  }
  return worst;
}

void check_close(const std::vector<float>& got, const std::vector<float>& want, double tol = kTolerance) {
  CHECK(worst_error(got, want) < tol);
}

std::vector<RankResult> run_case(const Case& c, EngineOptions options = {}, const CommHook& hook = nullptr) {
  std::vector<RankResult> results(c.world);
  run_ranks(c.world, [&](int rank, comm::ProcessGroupPtr g) {
    results[rank] = train_rank(c, rank, g, options, hook);
  });
  return results;
}

}  // namespace

TEST_CASE("equivalence: W ranks x batch B == one process x batch W*B") {
  for (int world : {1, 2, 3, 4}) {
    for (int micro : {1, 2}) {
      for (bool split : {true, false}) {
        // Split: a 256-byte first bucket and 1 KiB buckets (several buckets, rebuilt order
        // differs); not split: everything in one bucket.
        Case c{world, micro, split ? 256.0 / (1 << 20) : 1.0, split ? 1024.0 / (1 << 20) : 25.0};
        CAPTURE(world);
        CAPTURE(micro);
        CAPTURE(split);
        auto want = reference(c);
        auto results = run_case(c);
        for (const auto& r : results) {
          check_close(r.weights, want);
          CHECK(r.weights == results[0].weights);  // bit-identical across ranks
          CHECK(r.rebuilt);
          CHECK(r.final == results[0].final);
        }
        if (split) {
          CHECK(results[0].initial.size() > 2);
          // Backward marks weight before bias; registration reversed is bias before weight.
          CHECK(results[0].final != results[0].initial);
          CHECK(results[0].final.front().front() == 4);  // layer2.weight ready first
        } else {
          CHECK(results[0].initial.size() == 1);
        }
      }
    }
  }
}

// The negative control of the equivalence checks: the default hook, except that one bucket is
// averaged over n - 1 ranks instead of n. Training must come out measurably different, so the
// tolerance above is tight enough to catch a wrong scale in a single bucket.
TEST_CASE("negative control: a wrong scale in one bucket fails the equivalence check") {
  Case c{3, 1, 256.0 / (1 << 20), 1024.0 / (1 << 20)};
  auto want = reference(c);
  CommHook wrong = [base = allreduce_hook()](comm::ProcessGroup& g, GradBucket& b) {
    if (b.index == 0) b.post_divide *= static_cast<double>(g.size() - 1) / g.size();
    return base(g, b);
  };
  for (const auto& r : run_case(c, {}, wrong)) CHECK(worst_error(r.weights, want) > 10 * kTolerance);
  for (const auto& r : run_case(c, {}, allreduce_hook())) CHECK(worst_error(r.weights, want) < kTolerance);
}

TEST_CASE("equivalence in the fairseq mode (no mark_ready) and with a gradient pre-divide factor") {
  Case c{3, 1, 256.0 / (1 << 20), 1024.0 / (1 << 20)};
  auto want = reference(c);
  EngineOptions o;
  o.gradient_predivide_factor = 2.0;
  std::vector<std::vector<float>> got(3);
  run_ranks(3, [&](int rank, comm::ProcessGroupPtr g) {
    Dataset data(kSizes.front(), kSizes.back(), kSeed);
    Mlp m(kSizes, kSeed);
    Sgd sgd({0.1f, 0.9f});
    EngineOptions opts = o;
    opts.first_bucket_cap_mb = c.first_cap_mb;
    opts.bucket_cap_mb = c.cap_mb;
    Engine engine(g, opts);
    register_mlp(engine, m);
    engine.finalize();
    std::vector<float> x(static_cast<size_t>(kBatch) * data.dim());
    std::vector<int32_t> y(kBatch);
    for (int s = 0; s < kSteps; ++s) {
      m.zero_grad();
      data.batch(first_sample(c, s, 0, rank), kBatch, x.data(), y.data());
      m.forward(x.data(), y.data(), kBatch);
      m.backward();
      engine.finish_backward();
      sgd.step(m);
    }
    got[rank] = flatten(m);
  });
  for (const auto& w : got) check_close(w, want);
}

TEST_CASE("construction check: a differing parameter is named with the ranks, on every rank") {
  std::vector<std::string> errors(3);
  run_ranks(3, [&](int rank, comm::ProcessGroupPtr g) {
    std::vector<float> a(6), ga(6), b(4), gb(4);
    Engine engine(g);
    engine.register_param({"fc.weight", comm::view(a.data(), 6), comm::view(ga.data(), 6), {2, 3}});
    if (rank == 2) {
      engine.register_param({"fc.bias", comm::view(b.data(), 3), comm::view(gb.data(), 3), {}});
    } else {
      engine.register_param({"fc.bias", comm::view(b.data(), 4), comm::view(gb.data(), 4), {}});
    }
    try {
      engine.finalize();
    } catch (const InvalidArgument& e) {
      errors[rank] = e.message();
    }
  });
  for (const auto& e : errors) {
    CAPTURE(e);
    CHECK(e.find("fc.bias") != std::string::npos);
    CHECK(e.find("ranks [0, 1] have 'parameter 'fc.bias' [4]") != std::string::npos);
    CHECK(e.find("rank 2 has 'parameter 'fc.bias' [3]") != std::string::npos);
  }
}

TEST_CASE("construction check: a missing parameter and differing options are caught") {
  std::vector<std::string> errors(2);
  run_ranks(2, [&](int rank, comm::ProcessGroupPtr g) {
    std::vector<float> a(4), ga(4);
    EngineOptions o;
    Engine engine(g, o);
    engine.register_param({"w", comm::view(a.data(), 4), comm::view(ga.data(), 4), {}});
    if (rank == 0) engine.register_param({"extra", comm::view(a.data(), 4), comm::view(ga.data(), 4), {}});
    try {
      engine.finalize();
    } catch (const InvalidArgument& e) {
      errors[rank] = e.message();
    }
  });
  for (const auto& e : errors) CHECK(e.find("rank 1 has nothing") != std::string::npos);

  std::vector<std::string> opt_errors(2);
  run_ranks(2, [&](int rank, comm::ProcessGroupPtr g) {
    std::vector<float> a(4), ga(4);
    EngineOptions o;
    o.bucket_cap_mb = rank == 0 ? 25 : 10;
    Engine engine(g, o);
    engine.register_param({"w", comm::view(a.data(), 4), comm::view(ga.data(), 4), {}});
    try {
      engine.finalize();
    } catch (const InvalidArgument& e) {
      opt_errors[rank] = e.message();
    }
  });
  for (const auto& e : opt_errors) CHECK(e.find("bucket_cap_mb") != std::string::npos);
}

TEST_CASE("registration errors are clear and local") {
  run_ranks(1, [&](int, comm::ProcessGroupPtr g) {
    std::vector<float> a(4), ga(4);
    std::vector<double> gd(4);
    Engine engine(g);
    CHECK_THROWS_AS(engine.register_param({"w", comm::view(a.data(), 4), comm::view(ga.data(), 3), {}}),
                    InvalidArgument);
    CHECK_THROWS_AS(engine.register_param({"w", comm::view(a.data(), 4), comm::view(gd.data(), 4), {}}),
                    InvalidArgument);
    CHECK_THROWS_AS(engine.register_param({"w", comm::view(a.data(), 4), comm::view(ga.data(), 4), {3}}),
                    InvalidArgument);
    CHECK_THROWS_AS(engine.register_param({"w", comm::view(a.data(), 4), {}, {}}), InvalidArgument);
    CHECK_THROWS_AS(engine.mark_ready(0), InvalidArgument);  // before finalize
    engine.register_param({"w", comm::view(a.data(), 4), comm::view(ga.data(), 4), {2, 2}});
    CHECK_THROWS_AS(engine.register_param({"w", comm::view(a.data(), 4), comm::view(ga.data(), 4), {}}),
                    InvalidArgument);
    engine.finalize();
    CHECK_THROWS_AS(engine.finalize(), InvalidArgument);
    CHECK_THROWS_AS(engine.mark_ready(1), InvalidArgument);
    engine.mark_ready(0);
    CHECK_THROWS_AS(engine.mark_ready(0), InvalidArgument);  // twice in one iteration
    engine.finish_backward();
  });
}

TEST_CASE("unused parameters: reduced as zeros with find_unused_parameters, an error naming them without") {
  for (bool find_unused : {true, false}) {
    CAPTURE(find_unused);
    std::vector<std::vector<float>> grads(2);
    std::vector<std::string> errors(2);
    run_ranks(2, [&](int rank, comm::ProcessGroupPtr g) {
      std::vector<float> w0(2), w1(2), g0(2), g1(2);
      EngineOptions o;
      o.find_unused_parameters = find_unused;
      o.first_bucket_cap_mb = 4.0 / (1 << 20);  // one parameter per bucket
      o.bucket_cap_mb = 4.0 / (1 << 20);
      Engine engine(g, o);
      engine.register_param({"used", comm::view(w0.data(), 2), comm::view(g0.data(), 2), {}});
      engine.register_param({"sometimes", comm::view(w1.data(), 2), comm::view(g1.data(), 2), {}});
      engine.finalize();
      g0 = {1.0f + rank, 1.0f};
      g1 = {10.0f, 20.0f};  // stale values: must not leak into the average on rank 1
      engine.mark_ready(0);
      if (rank == 0) engine.mark_ready(1);
      try {
        engine.finish_backward();
      } catch (const InvalidArgument& e) {
        errors[rank] = e.message();
      }
      grads[rank] = {g0[0], g0[1], g1[0], g1[1]};
    });
    for (int r = 0; r < 2; ++r) {
      CHECK(grads[r] == std::vector<float>{1.5f, 1.0f, 5.0f, 10.0f});
    }
    CHECK(errors[0].empty());
    if (find_unused) {
      CHECK(errors[1].empty());
    } else {
      CHECK(errors[1].find("'sometimes' (index 1)") != std::string::npos);
      CHECK(errors[1].find("find_unused_parameters") != std::string::npos);
    }
  }
}

TEST_CASE("static_graph: unused parameters found once, then ready from the start") {
  std::vector<std::vector<float>> grads(2);
  run_ranks(2, [&](int rank, comm::ProcessGroupPtr g) {
    std::vector<float> w(3), gw(3), u(3), gu(3);
    EngineOptions o;
    o.find_unused_parameters = true;
    o.static_graph = true;
    Engine engine(g, o);
    engine.register_param({"w", comm::view(w.data(), 3), comm::view(gw.data(), 3), {}});
    engine.register_param({"unused", comm::view(u.data(), 3), comm::view(gu.data(), 3), {}});
    engine.finalize();
    for (int it = 0; it < 3; ++it) {
      gw = {float(rank), float(it), 1};
      engine.mark_ready(0);
      engine.finish_backward();
    }
    CHECK_THROWS_AS(engine.mark_ready(1), InvalidArgument);  // static_graph said it is unused
    engine.mark_ready(0);
    engine.finish_backward();
    grads[rank] = gw;
  });
  CHECK(grads[0] == std::vector<float>{0.5f, 2.0f, 1.0f});
  CHECK(grads[1] == grads[0]);
}

TEST_CASE("gradient_as_bucket_view: gradients live in bucket memory and survive the rebuild") {
  std::vector<std::vector<float>> out(2);
  run_ranks(2, [&](int rank, comm::ProcessGroupPtr g) {
    std::vector<float> a(4), b(4), c(4);
    EngineOptions o;
    o.gradient_as_bucket_view = true;
    Engine engine(g, o);
    engine.register_param({"a", comm::view(a.data(), 4), {}, {}});
    engine.register_param({"b", comm::view(b.data(), 4), {}, {}});
    engine.register_param({"c", comm::view(c.data(), 4), {}, {}});
    engine.finalize();
    // One bucket in reverse registration order: c, b, a, contiguous.
    auto ga = engine.grad(0), gb = engine.grad(1), gc = engine.grad(2);
    CHECK(static_cast<float*>(gb.data) == static_cast<float*>(gc.data) + 4);
    CHECK(static_cast<float*>(ga.data) == static_cast<float*>(gb.data) + 4);
    for (size_t p = 0; p < 3; ++p) {
      float* v = static_cast<float*>(engine.grad(p).data);
      for (int i = 0; i < 4; ++i) v[i] = static_cast<float>(10 * p + i + rank);
    }
    for (size_t p : {0, 1, 2}) engine.mark_ready(p);  // ready order a, b, c: the rebuild follows it
    engine.finish_backward();
    CHECK(engine.buckets().front() == std::vector<size_t>{0, 1, 2});
    CHECK(static_cast<float*>(engine.grad(1).data) == static_cast<float*>(engine.grad(0).data) + 4);
    for (size_t p = 0; p < 3; ++p) {
      const float* v = static_cast<const float*>(engine.grad(p).data);
      out[rank].insert(out[rank].end(), v, v + 4);
    }
  });
  for (int r = 0; r < 2; ++r) {
    for (size_t p = 0; p < 3; ++p) {
      for (int i = 0; i < 4; ++i) CHECK(out[r][p * 4 + i] == doctest::Approx(10.0 * p + i + 0.5));
    }
  }
}

TEST_CASE("buffers are broadcast from rank 0 before each forward; parameters at construction") {
  std::vector<std::vector<float>> seen(3);
  run_ranks(3, [&](int rank, comm::ProcessGroupPtr g) {
    std::vector<float> w(2, float(rank)), gw(2), stats(3, float(rank));
    Engine engine(g);
    engine.register_param({"w", comm::view(w.data(), 2), comm::view(gw.data(), 2), {}});
    engine.register_buffer({"running_mean", comm::view(stats.data(), 3), {}});
    engine.finalize();
    seen[rank] = {w[0], stats[0]};
    stats.assign(3, float(rank + 5));
    engine.pre_forward();
    seen[rank].push_back(stats[2]);
  });
  for (const auto& s : seen) CHECK(s == std::vector<float>{0, 0, 5});
}
