#include "ddp/powersgd.h"

#include <doctest/doctest.h>

#include <cmath>
#include <memory>
#include <string>
#include <vector>

#include "common/error.h"
#include "ddp/engine.h"
#include "tests/ddp/rank_threads.h"

using namespace ddp;
using ddp::testing::run_ranks;

namespace {

constexpr int kWorld = 2;
constexpr size_t kRows = 16, kCols = 8;

// One matrix parameter (kRows x kCols) and one bias (kRows) through powersgd_hook, one
// finish_backward per entry of `grads` (each rank's gradients, per step); returns rank 0's
// gradients after each step and checks that every rank got the same.
struct Step {
  std::vector<std::vector<float>> w, b;  // per rank
};
std::vector<std::pair<std::vector<float>, std::vector<float>>> reduce(
    const std::vector<Step>& steps, PowerSGDOptions options, std::shared_ptr<PowerSGDState>* keep = nullptr) {
  std::vector<std::vector<std::pair<std::vector<float>, std::vector<float>>>> out(kWorld);
  auto state0 = std::make_shared<PowerSGDState>(options);
  if (keep) *keep = state0;
  run_ranks(kWorld, [&](int rank, comm::ProcessGroupPtr g) {
    std::vector<float> w(kRows * kCols), gw(kRows * kCols), b(kRows), gb(kRows);
    Engine engine(g);
    engine.register_param({"w",
                           comm::view(w.data(), w.size()),
                           comm::view(gw.data(), gw.size()),
                           {int64_t(kRows), int64_t(kCols)}});
    engine.register_param({"b", comm::view(b.data(), b.size()), comm::view(gb.data(), gb.size()), {}});
    engine.register_comm_hook(powersgd_hook(rank == 0 ? state0 : std::make_shared<PowerSGDState>(options)));
    engine.finalize();
    for (const auto& s : steps) {
      gw = s.w[rank];
      gb = s.b[rank];
      engine.finish_backward();
      out[rank].push_back({gw, gb});
    }
  });
  for (int r = 1; r < kWorld; ++r) CHECK(out[r] == out[0]);
  return out[0];
}

std::vector<float> average(const std::vector<std::vector<float>>& per_rank) {
  std::vector<float> a(per_rank[0].size());
  for (const auto& v : per_rank)
    for (size_t i = 0; i < a.size(); ++i) a[i] += v[i] / kWorld;
  return a;
}

double max_abs_diff(const std::vector<float>& a, const std::vector<float>& b) {
  double m = 0;
  for (size_t i = 0; i < a.size(); ++i) m = std::max(m, std::abs(double(a[i]) - b[i]));
  return m;
}

double distance(const std::vector<float>& a, const std::vector<float>& b) {  // Frobenius
  double sum = 0;
  for (size_t i = 0; i < a.size(); ++i) sum += (double(a[i]) - b[i]) * (double(a[i]) - b[i]);
  return std::sqrt(sum);
}

// rank r: w = u (v + r e)^T, plus `second` * x y^T (a second rank-1 term), b = bias values.
Step gradients(float second) {
  Step s;
  for (int r = 0; r < kWorld; ++r) {
    std::vector<float> w(kRows * kCols), b(kRows);
    for (size_t i = 0; i < kRows; ++i) {
      b[i] = std::cos(float(i)) + r;
      for (size_t j = 0; j < kCols; ++j) {
        const float u = std::sin(1.0f + i), v = std::cos(2.0f + j) + 0.5f * r * (j % 3);
        const float x = (i % 2 ? 1.0f : -1.0f), y = std::sin(3.0f * j);
        w[i * kCols + j] = u * v + second * x * y;
      }
    }
    s.w.push_back(w);
    s.b.push_back(b);
  }
  return s;
}

}  // namespace

TEST_CASE("powersgd_hook: plain averages first; then a rank-1 average exactly, the bias uncompressed") {
  PowerSGDOptions o;
  o.start_powersgd_iter = 2;
  std::shared_ptr<PowerSGDState> state;
  const Step g = gradients(0);
  auto out = reduce({g, g, g}, o, &state);
  for (size_t s = 0; s < out.size(); ++s) {
    CAPTURE(s);
    CHECK(max_abs_diff(out[s].first, average(g.w)) < 1e-5);  // rank-1 average: P Q^T is exact
    CHECK(out[s].second == average(g.b));                    // the bias all_reduced as it is
  }
  CHECK(state->iteration() == 3);
  // One compressed step: the matrix as (16 + 8) x 1, the bias as its 16 elements.
  CHECK(state->numel_before_compression() == int64_t(kRows * kCols + kRows));
  CHECK(state->numel_after_compression() == int64_t(kRows + kCols + kRows));
}

TEST_CASE("powersgd_hook: error feedback sends next step what compression dropped") {
  PowerSGDOptions o;
  o.start_powersgd_iter = 2;
  const Step g = gradients(1.0f);
  Step none = g;
  for (auto& w : none.w) std::fill(w.begin(), w.end(), 0.0f);
  for (auto& b : none.b) std::fill(b.begin(), b.end(), 0.0f);
  const auto target = average(g.w);
  for (const bool feedback : {true, false}) {
    CAPTURE(feedback);
    o.use_error_feedback = feedback;
    auto out = reduce({g, g, g, none}, o);
    const double dropped = distance(out[2].first, target);
    CHECK(dropped > 1e-2);  // the average has rank 2: rank 1 loses a part
    std::vector<float> both(target.size());
    for (size_t i = 0; i < both.size(); ++i) both[i] = out[2].first[i] + out[3].first[i];
    if (feedback) {
      CHECK(distance(both, target) < 0.9 * dropped);  // the zero step carried part of the residual
    } else {
      CHECK(max_abs_diff(out[3].first, std::vector<float>(target.size())) == 0.0);
    }
  }
}

TEST_CASE("powersgd_hook: bad options and buckets are errors that say what is wrong") {
  PowerSGDOptions o;
  o.start_powersgd_iter = 1;
  CHECK_THROWS_AS(PowerSGDState{o}, InvalidArgument);
  o.start_powersgd_iter = 2;
  o.matrix_approximation_rank = 0;
  CHECK_THROWS_AS(PowerSGDState{o}, InvalidArgument);
  o.matrix_approximation_rank = 1;
  o.use_error_feedback = o.warm_start = false;
  o.start_powersgd_iter = 0;  // compressing from the first step
  run_ranks(1, [&](int, comm::ProcessGroupPtr g) {
    std::vector<int32_t> w(2), gw(2);
    Engine engine(g);
    engine.register_param({"w", comm::view(w.data(), 2), comm::view(gw.data(), 2), {}});
    engine.register_comm_hook(powersgd_hook(std::make_shared<PowerSGDState>(o)));
    engine.finalize();
    CHECK_THROWS_WITH_AS(engine.finish_backward(), doctest::Contains("float32 or float64"), InvalidArgument);
  });
}

namespace {

// One rank's engine over `state`: w and b as in reduce(), one finish_backward per step given.
std::vector<std::vector<float>> steps_of(comm::ProcessGroupPtr g, int rank, PowerSGDState& state,
                                         const std::vector<Step>& steps) {
  std::vector<float> w(kRows * kCols), gw(kRows * kCols), b(kRows), gb(kRows);
  Engine engine(g);
  engine.register_param({"w",
                         comm::view(w.data(), w.size()),
                         comm::view(gw.data(), gw.size()),
                         {int64_t(kRows), int64_t(kCols)}});
  engine.register_param({"b", comm::view(b.data(), b.size()), comm::view(gb.data(), gb.size()), {}});
  engine.register_comm_hook(powersgd_hook(std::shared_ptr<PowerSGDState>(&state, [](PowerSGDState*) {})));
  engine.finalize();
  std::vector<std::vector<float>> out;
  for (const auto& s : steps) {
    gw = s.w[rank];
    gb = s.b[rank];
    engine.finish_backward();
    out.push_back(gw);
  }
  return out;
}

}  // namespace

// A checkpoint per rank after a compressed step; the next step's gradients from a fresh state
// that loaded it must be those of the state that went on. Cold Qs (warm_start off) draw a new
// seed each step: the seed stream must resume too.
TEST_CASE("powersgd_hook: a state saved and loaded per rank resumes the same steps") {
  for (const bool warm : {true, false}) {
    CAPTURE(warm);
    PowerSGDOptions o;
    o.start_powersgd_iter = 2;
    o.warm_start = warm;
    const Step g = gradients(1.0f);  // rank 2: rank 1 leaves an error to feed back
    Step h = gradients(-0.5f);
    std::vector<std::vector<float>> went_on(kWorld), resumed(kWorld), shared(kWorld), fresh(kWorld);
    run_ranks(kWorld, [&](int rank, comm::ProcessGroupPtr group) {
      PowerSGDState first(o);
      steps_of(group, rank, first, {g, g, g});
      const std::string saved = first.save();
      went_on[rank] = steps_of(group, rank, first, {h}).at(0);
      PowerSGDState again(o);
      again.load(saved);
      CHECK(again.iteration() == 3);
      CHECK(again.save() == saved);
      resumed[rank] = steps_of(group, rank, again, {h}).at(0);
      PowerSGDState without_error(o);
      without_error.load_shared(saved);
      shared[rank] = steps_of(group, rank, without_error, {h}).at(0);
      PowerSGDState none(o);
      fresh[rank] = steps_of(group, rank, none, {h}).at(0);
    });
    for (int r = 0; r < kWorld; ++r) {
      CAPTURE(r);
      CHECK(resumed[r] == went_on[r]);
      CHECK(max_abs_diff(shared[r], went_on[r]) > 1e-3);  // the error feedback mattered
      CHECK(max_abs_diff(fresh[r], went_on[r]) > 1e-3);   // a fresh state averages plainly
    }
  }
}

TEST_CASE(
    "PowerSGDState::load: another rank setting, truncated or foreign bytes are errors, the state kept") {
  PowerSGDOptions o;
  o.start_powersgd_iter = 2;
  PowerSGDState one(o);
  const std::string saved = one.save();
  o.matrix_approximation_rank = 2;
  PowerSGDState two(o);
  CHECK_THROWS_WITH_AS(two.load(saved), doctest::Contains("rank 1"), InvalidArgument);
  const std::string before = two.save();
  CHECK_THROWS_AS(two.load(saved.substr(0, saved.size() - 1)), InvalidArgument);
  CHECK_THROWS_AS(two.load("not a state"), InvalidArgument);
  CHECK_THROWS_AS(two.load(before + "x"), InvalidArgument);
  CHECK(two.save() == before);
}
