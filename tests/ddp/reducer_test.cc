#include "ddp/reducer.h"

#include <doctest/doctest.h>

#include <atomic>
#include <mutex>

#include "common/error.h"
#include "tests/ddp/rank_threads.h"

using namespace ddp;
using ddp::testing::run_ranks;

namespace {

struct Model {
  std::vector<std::vector<float>> data, grads;
  std::vector<ParamSpec> specs;
  explicit Model(int n, size_t count = 4)
      : data(n, std::vector<float>(count)), grads(n, std::vector<float>(count)) {
    for (int i = 0; i < n; ++i) {
      specs.push_back({std::string(1, 'p') + std::to_string(i),
                       comm::view(data[i].data(), count),
                       comm::view(grads[i].data(), count),
                       {}});
    }
  }
};

Reducer::Options one_param_per_bucket() {
  Reducer::Options o;
  o.first_cap_bytes = 16;
  o.cap_bytes = 16;
  return o;
}

}  // namespace

TEST_CASE("buckets launch in order: a ready later bucket waits for the earlier ones") {
  std::vector<std::vector<std::pair<size_t, int>>> launches(2);  // (bucket, marks so far)
  run_ranks(2, [&](int rank, comm::ProcessGroupPtr g) {
    Model m(3);
    Reducer reducer(g, m.specs, one_param_per_bucket());
    std::atomic<int> marks = 0;
    reducer.set_hook([&](comm::ProcessGroup& group, GradBucket& b) {
      launches[rank].push_back({b.index, marks.load()});
      return group.all_reduce(b.buffer);
    });
    // Buckets are [p2], [p1], [p0]. Rank 0 marks p0 first: nothing may launch until p2.
    std::vector<size_t> order = rank == 0 ? std::vector<size_t>{0, 1, 2} : std::vector<size_t>{2, 1, 0};
    for (size_t p : order) {
      ++marks;
      reducer.mark_ready(p);
    }
    reducer.finish();
  });
  // Hooks run on the bucket thread, so a hook may see more marks than its launch needed,
  // never fewer: rank 0's wait for p2, rank 1's hooks at least one mark behind each other.
  CHECK(launches[0] == std::vector<std::pair<size_t, int>>{{0, 3}, {1, 3}, {2, 3}});
  REQUIRE(launches[1].size() == 3);
  for (size_t i = 0; i < 3; ++i) {
    CHECK(launches[1][i].first == i);
    CHECK(launches[1][i].second >= static_cast<int>(i) + 1);
  }
}

TEST_CASE("the rebuild follows rank 0's ready order on every rank, once") {
  std::vector<BucketAssignment> before(3), after(3), later(3);
  run_ranks(3, [&](int rank, comm::ProcessGroupPtr g) {
    Model m(4);
    Reducer reducer(g, m.specs, one_param_per_bucket());
    before[rank] = reducer.assignment();
    std::vector<size_t> order = rank == 0 ? std::vector<size_t>{1, 3, 0, 2} : std::vector<size_t>{3, 2, 1, 0};
    for (size_t p : order) reducer.mark_ready(p);
    reducer.finish();
    CHECK(reducer.rebuilt());
    after[rank] = reducer.assignment();
    for (size_t p : {2, 0, 3, 1}) reducer.mark_ready(p);  // a different order: no second rebuild
    reducer.finish();
    later[rank] = reducer.assignment();
  });
  CHECK(before[0] == BucketAssignment{{3}, {2}, {1}, {0}});
  for (int r = 0; r < 3; ++r) {
    CHECK(after[r] == BucketAssignment{{1}, {3}, {0}, {2}});
    CHECK(later[r] == after[r]);
  }
}

TEST_CASE("averages land in the gradients; the fairseq mode reduces everything") {
  std::vector<std::vector<float>> out(2);
  run_ranks(2, [&](int rank, comm::ProcessGroupPtr g) {
    Model m(2, 3);
    Reducer reducer(g, m.specs, {});
    m.grads[0] = {float(rank), 2, 4};
    m.grads[1] = {1, 1, float(2 * rank)};
    reducer.finish();  // nothing marked
    out[rank] = m.grads[0];
    out[rank].insert(out[rank].end(), m.grads[1].begin(), m.grads[1].end());
  });
  CHECK(out[0] == std::vector<float>{0.5f, 2, 4, 1, 1, 1});
  CHECK(out[1] == out[0]);
}

TEST_CASE("shadow: a joined rank's zero buckets match the active ranks' collectives") {
  std::vector<std::vector<float>> out(2);
  run_ranks(2, [&](int rank, comm::ProcessGroupPtr g) {
    Model m(3);
    Reducer reducer(g, m.specs, one_param_per_bucket());
    if (rank == 1) {
      m.grads = {{9, 9, 9, 9}, {9, 9, 9, 9}, {9, 9, 9, 9}};
      reducer.set_divisor(1);
      reducer.shadow();
    } else {
      m.grads = {{2, 2, 2, 2}, {4, 4, 4, 4}, {6, 6, 6, 6}};
      reducer.set_divisor(1);  // one active rank
      for (size_t p : {0, 1, 2}) reducer.mark_ready(p);
      reducer.finish();
    }
    out[rank] = {m.grads[0][0], m.grads[1][0], m.grads[2][0]};
    CHECK(reducer.rebuilt());
  });
  CHECK(out[0] == std::vector<float>{2, 4, 6});
  CHECK(out[1] == std::vector<float>{9, 9, 9});  // untouched
}

TEST_CASE("a hook that returns no Work is an error from finish, with copies or bucket views") {
  for (bool views : {false, true}) {
    CAPTURE(views);
    run_ranks(1, [&](int, comm::ProcessGroupPtr g) {
      Model m(1);
      Reducer::Options o;
      o.gradient_as_bucket_view = views;
      Reducer reducer(g, m.specs, o);
      reducer.set_hook([](comm::ProcessGroup&, GradBucket&) { return comm::WorkPtr(); });
      reducer.mark_ready(0);
      CHECK_THROWS_WITH_AS(reducer.finish(), doctest::Contains("no Work for bucket 0"), InvalidArgument);
    });
  }
}

TEST_CASE("host buckets live in the group's memory: on tcp within a host they are reduced in place") {
  std::vector<std::vector<float>> out(2);
  std::vector<int> shared(2, 0);
  run_ranks(2, [&](int rank, comm::ProcessGroupPtr g) {
    Model m(1, 100000);  // 400 KB: past the one-shot size
    Reducer reducer(g, m.specs, {});
    for (size_t i = 0; i < m.grads[0].size(); ++i) m.grads[0][i] = static_cast<float>(rank * 2 + i % 3);
    reducer.finish();
    out[rank] = m.grads[0];
    shared[rank] = reducer.buckets_shared() ? 1 : 0;
  });
  for (size_t i = 0; i < out[0].size(); ++i) REQUIRE(out[0][i] == 1.0f + static_cast<float>(i % 3));
  CHECK(out[1] == out[0]);
  // tcp with every rank on this host: shared memory; gloo and mpi: plain host memory.
  const int want = ddp::testing::test_backend() == "tcp" ? 1 : 0;
  CHECK(shared == std::vector<int>{want, want});
}
