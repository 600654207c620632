// The DDP timeline (ddp/timeline.h): two ranks as threads write one Chrome trace each, whose
// events come in a consistent order; and a real 2-rank job under ddp-launch --timeline, whose
// ranks' files the launcher merges into one.
#include "ddp/timeline.h"

#include <doctest/doctest.h>
#include <stdlib.h>

#include <map>
#include <nlohmann/json.hpp>

#include "cli/launch_test_util.h"
#include "common/timeline_path.h"
#include "ddp/engine.h"
#include "examples/dataset.h"
#include "examples/mlp.h"
#include "tests/ddp/rank_threads.h"

using namespace ddp;
using ddp::testing::run_ranks;

namespace {

const std::vector<int> kSizes{8, 16, 16, 4};
constexpr int kBatch = 4;
constexpr int kSteps = 3;

void train(int rank, comm::ProcessGroupPtr group, EngineOptions options) {
  example::Dataset data(kSizes.front(), kSizes.back(), 7);
  example::Mlp m(kSizes, 7);
  example::Sgd sgd({0.1f, 0.9f});
  options.first_bucket_cap_mb = 0.0004;  // a few buckets of this small model
  options.bucket_cap_mb = 0.0004;
  Engine engine(group, options);
  std::vector<size_t> ids;
  for (auto& lin : m.layers()) {
    const std::string l = std::to_string(ids.size() / 2);
    ids.push_back(engine.register_param({"w" + l,
                                         comm::view(lin.weight.data(), lin.weight.size()),
                                         comm::view(lin.grad_weight.data(), lin.grad_weight.size()),
                                         {lin.out, lin.in}}));
    ids.push_back(engine.register_param({"b" + l,
                                         comm::view(lin.bias.data(), lin.bias.size()),
                                         comm::view(lin.grad_bias.data(), lin.grad_bias.size()),
                                         {}}));
  }
  engine.finalize();
  std::vector<float> x(static_cast<size_t>(kBatch) * data.dim());
  std::vector<int32_t> y(kBatch);
  for (int s = 0; s < kSteps; ++s) {
    m.zero_grad();
    data.batch((s * 2 + rank) * kBatch, kBatch, x.data(), y.data());
    engine.pre_forward();
    m.forward(x.data(), y.data(), kBatch);
    m.backward([&](size_t l) {
      engine.mark_ready(ids[2 * l]);
      engine.mark_ready(ids[2 * l + 1]);
    });
    engine.finish_backward();
    sgd.step(m);
  }
}

nlohmann::json read_trace(const std::string& path) {
  nlohmann::json trace = nlohmann::json::parse(ddp::test::slurp(path));
  REQUIRE(trace.is_array());
  return trace;
}

struct Span {
  int64_t begin = 0, end = 0;
};

// One rank's trace, checked: per step, forward < backward < wait < optimizer step on track 0,
// and every bucket ready, then its collective (between copies when gradients are copied),
// ending before the wait does.
void check_rank(const nlohmann::json& trace, int rank, bool copies) {
  std::map<int64_t, std::map<std::string, Span>> steps;                   // step -> name -> span
  std::map<int64_t, std::map<int, std::map<std::string, Span>>> buckets;  // step -> tid -> name
  bool named = false;
  for (const auto& e : trace) {
    CHECK(e.at("pid") == rank);
    if (e.at("ph") == "M") {
      if (e.at("name") == "process_name") named = e.at("args").at("name") == "rank " + std::to_string(rank);
      continue;
    }
    const int64_t step = e.at("args").at("step");
    const int64_t ts = e.at("ts");
    const int64_t end = ts + e.value("dur", int64_t{0});
    const int tid = e.at("tid");
    const std::string name = e.at("name");
    auto& slot = tid == Timeline::kStepTrack ? steps[step][name] : buckets[step][tid][name];
    CHECK(slot.end == 0);  // once per step
    slot = {ts, end};
  }
  CHECK(named);
  REQUIRE(steps.size() == kSteps);
  int64_t previous_end = 0;
  for (int64_t s = 1; s <= kSteps; ++s) {
    CAPTURE(s);
    auto& st = steps[s];
    REQUIRE(st.count("forward (to the first gradient)") == 1);
    REQUIRE(st.count("backward") == 1);
    REQUIRE(st.count("wait for buckets") == 1);
    const Span fwd = st["forward (to the first gradient)"], bwd = st["backward"],
               wait = st["wait for buckets"];
    CHECK(previous_end <= fwd.begin);
    CHECK(fwd.begin <= fwd.end);
    CHECK(fwd.end <= bwd.begin);
    CHECK(bwd.end <= wait.begin);
    CHECK(wait.begin <= wait.end);
    if (s < kSteps) {
      REQUIRE(st.count("optimizer step") == 1);
      CHECK(wait.end <= st["optimizer step"].begin);
      previous_end = st["optimizer step"].end;
    } else {
      CHECK(st.count("optimizer step") == 0);
    }
    REQUIRE(buckets[s].size() >= 2);
    for (auto& [tid, ev] : buckets[s]) {
      CAPTURE(tid);
      REQUIRE(ev.count("ready") == 1);
      REQUIRE(ev.count("collective") == 1);
      CHECK(fwd.begin <= ev["ready"].begin);
      CHECK(ev["ready"].begin <= ev["collective"].begin);
      CHECK(ev["collective"].end <= wait.end);
      CHECK(ev.count("copy in") == (copies ? 1 : 0));
      CHECK(ev.count("copy out") == (copies ? 1 : 0));
      if (copies) {
        CHECK(ev["ready"].begin <= ev["copy in"].begin);
        CHECK(ev["copy in"].end <= ev["collective"].begin);
        CHECK(ev["collective"].end <= ev["copy out"].begin);
        CHECK(ev["copy out"].end <= wait.end);
      }
    }
  }
}

}  // namespace

TEST_CASE("timeline: off by default (no DDP_TIMELINE); a rank's file name; each rank's trace in order") {
  ::unsetenv("DDP_TIMELINE");
  CHECK(Timeline::open("", 0) == nullptr);
  CHECK(timeline_rank_path("out/trace.json", 3) == "out/trace.rank3.json");
  CHECK(timeline_rank_path("t", 0) == "t.rank0.json");
  ddp::test::ScratchDir dir;
  for (bool view : {false, true}) {
    CAPTURE(view);
    EngineOptions options;
    options.gradient_as_bucket_view = view;
    options.timeline = dir / (view ? "view.json" : "copy.json");
    run_ranks(2, [&](int rank, comm::ProcessGroupPtr group) { train(rank, group, options); });
    for (int rank : {0, 1}) {
      CAPTURE(rank);
      check_rank(read_trace(timeline_rank_path(options.timeline, rank)), rank, !view);
    }
  }
}

TEST_CASE("timeline: a 2-rank job under ddp-launch --timeline, merged into one trace") {
  ddp::test::ScratchDir dir;
  const std::string merged = dir / "job.json";
  auto r = ddp::test::launch(
      dir, {"--standalone", "--nproc-per-node", "2", "--timeline", merged,
            ddp::test::bin_dir() + "/ddp-train-mlp", "--epochs", "1", "--samples", "64", "--batch", "8"});
  CHECK(r.code == 0);
  CHECK(r.err.find("timeline: 2 rank(s) merged into " + merged) != std::string::npos);
  const auto trace = read_trace(merged);
  std::map<int, int> waits;  // rank -> "wait for buckets" events
  for (const auto& e : trace) {
    if (e.at("name") == "wait for buckets") ++waits[e.at("pid").get<int>()];
  }
  CHECK(waits.size() == 2);
  CHECK(waits[0] == 4);  // 64 samples, 2 ranks, 8 per batch: 4 steps each
  CHECK(waits[0] == waits[1]);
}
