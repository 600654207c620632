#include "comm/gloo/gloo_process_group.h"

#include <doctest/doctest.h>

#include <atomic>
#include <cstdint>
#include <future>
#include <numeric>

#include "comm/gloo/ranks.h"
#include "common/error.h"
#include "tests/comm/reduction_inputs.h"

using namespace ddp;
using namespace ddp::comm;
using ddp::test::kArithmeticOps;
using ddp::test::reduction_input;
using ddp::test::reduction_oracle_failure;
using ddp::test::reduction_result;
using ddp::test::run_ranks;

namespace {

// Rank r's inputs for `op` (tests/comm/reduction_inputs.h: no rank's buffer is the result, no
// op's result another's; exact in every dtype).
template <typename T>
std::vector<T> filled(ReduceOp op, size_t n, int rank) {
  std::vector<T> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = static_cast<T>(reduction_input(dtype_of<T>(), op, rank, i));
  return v;
}

template <typename T>
double expect(ReduceOp op, size_t i, int n) {
  return reduction_result(dtype_of<T>(), op, n, i);
}

template <typename T>
void check_all_reduce(int n, ReduceOp op, size_t count) {
  const std::string oracle = reduction_oracle_failure(dtype_of<T>(), op, n, 0, count);
  REQUIRE_MESSAGE(oracle.empty(), oracle);
  std::vector<std::vector<T>> out(n);
  run_ranks(make_gloo_group, n, [&](ProcessGroup& pg, int r) {
    out[r] = filled<T>(op, count, r);
    pg.all_reduce(view(out[r].data(), count), {op})->wait();
  });
  for (int r = 0; r < n; ++r) {
    for (size_t i = 0; i < count; ++i) {
      INFO("rank ", r, " i ", i, " op ", to_string(op), " dtype ", to_string(dtype_of<T>()));
      CHECK(static_cast<double>(out[r][i]) == expect<T>(op, i, n));  // exact
    }
  }
}

}  // namespace

TEST_CASE("gloo all_reduce: every dtype and op, threads as ranks") {
  for (ReduceOp op : kArithmeticOps) {
    check_all_reduce<float>(3, op, 1000);
    check_all_reduce<double>(2, op, 7);
    check_all_reduce<int32_t>(3, op, 333);
    check_all_reduce<int64_t>(2, op, 5);
    check_all_reduce<int8_t>(3, op, 4);
    check_all_reduce<uint8_t>(2, op, 3);
  }
  // Large enough for Gloo to split into many segments.
  check_all_reduce<float>(2, ReduceOp::kSum, (1 << 20) + 3);
}

TEST_CASE("gloo all_reduce: bitwise ops on integers") {
  const int n = 3;
  std::vector<std::vector<int32_t>> band(n), bor(n), bxor(n);
  run_ranks(make_gloo_group, n, [&](ProcessGroup& pg, int r) {
    band[r] = {0x7 << r, 0xFF};
    bor[r] = {1 << r, 0};
    bxor[r] = {1 << r, 5};
    pg.all_reduce(view(band[r].data(), 2), {ReduceOp::kBand})->wait();
    pg.all_reduce(view(bor[r].data(), 2), {ReduceOp::kBor})->wait();
    pg.all_reduce(view(bxor[r].data(), 2), {ReduceOp::kBxor})->wait();
  });
  for (int r = 0; r < n; ++r) {
    CHECK(band[r] == std::vector<int32_t>{0x7 & (0x7 << 1) & (0x7 << 2), 0xFF});
    CHECK(bor[r] == std::vector<int32_t>{0x7, 0});
    CHECK(bxor[r] == std::vector<int32_t>{0x7, 5});
  }
}

TEST_CASE("gloo all_reduce: float16 and bfloat16 sum and avg") {
  const int n = 3;
  std::vector<std::vector<uint16_t>> h(n), b(n);
  run_ranks(make_gloo_group, n, [&](ProcessGroup& pg, int r) {
    h[r].assign(9, float_to_half(1.5f * (r + 1)));
    constexpr float kB[] = {2, 4, 12};  // a mean (6) that is no rank's value
    b[r].assign(9, float_to_bfloat16(kB[r]));
    pg.all_reduce(Buffer{h[r].data(), 9, DType::kFloat16, {}}, {ReduceOp::kSum})->wait();
    pg.all_reduce(Buffer{b[r].data(), 9, DType::kBFloat16, {}}, {ReduceOp::kAvg})->wait();
  });
  for (int r = 0; r < n; ++r) {
    for (size_t i = 0; i < 9; ++i) {
      CHECK(half_to_float(h[r][i]) == 9.0f);
      CHECK(bfloat16_to_float(b[r][i]) == 6.0f);
    }
  }
}

TEST_CASE("gloo broadcast, reduce, gather, scatter from a non-zero root") {
  const int n = 3;
  std::vector<std::vector<float>> bc(n), red(n), gat(n), sca(n);
  run_ranks(make_gloo_group, n, [&](ProcessGroup& pg, int r) {
    bc[r] = filled<float>(ReduceOp::kSum, 10, r);
    pg.broadcast(view(bc[r].data(), 10), {1})->wait();
    red[r] = filled<float>(ReduceOp::kAvg, 10, r);
    pg.reduce(view(red[r].data(), 10), {2, ReduceOp::kAvg})->wait();
    std::vector<float> mine(4, static_cast<float>(r));
    gat[r].assign(r == 1 ? 12 : 0, -1.0f);
    pg.gather(view(mine.data(), 4), view(gat[r].data(), gat[r].size()), {1})->wait();
    std::vector<float> all(r == 2 ? 6 : 0);
    std::iota(all.begin(), all.end(), 100.0f);
    sca[r].assign(2, -1.0f);
    pg.scatter(view(all.data(), all.size()), view(sca[r].data(), 2), {2})->wait();
  });
  for (int r = 0; r < n; ++r) {
    CHECK(bc[r] == filled<float>(ReduceOp::kSum, 10, 1));
    CHECK(sca[r] == std::vector<float>{100.0f + 2 * r, 101.0f + 2 * r});
  }
  for (size_t i = 0; i < 10; ++i)
    CHECK(static_cast<double>(red[2][i]) == expect<float>(ReduceOp::kAvg, i, n));
  CHECK(red[0] == filled<float>(ReduceOp::kAvg, 10, 0));  // non-root buffers are left alone
  CHECK(red[1] == filled<float>(ReduceOp::kAvg, 10, 1));
  CHECK(gat[1] == std::vector<float>{0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 2, 2});
}

TEST_CASE("gloo all_gather, reduce_scatter, all_to_all, barrier") {
  const int n = 3;
  std::vector<std::vector<int64_t>> ag(n), rs(n), a2a(n);
  std::vector<std::vector<float>> rs_avg(n);
  run_ranks(make_gloo_group, n, [&](ProcessGroup& pg, int r) {
    std::vector<int64_t> mine{r, r * 10};
    ag[r].assign(6, -1);
    pg.all_gather(view(mine.data(), 2), view(ag[r].data(), 6))->wait();
    std::vector<int64_t> in(6);
    for (int i = 0; i < 6; ++i) in[i] = i * (r + 1);
    const std::vector<int64_t> in_copy = in;
    rs[r].assign(2, -1);
    pg.reduce_scatter(view(in.data(), 6), view(rs[r].data(), 2), {ReduceOp::kSum})->wait();
    CHECK(in == in_copy);                // the input is not modified
    constexpr float kIn[] = {0, 6, 30};  // a mean (12) that is no rank's value
    std::vector<float> fin(3, kIn[r]);
    rs_avg[r].assign(1, 0);
    pg.reduce_scatter(view(fin.data(), 3), view(rs_avg[r].data(), 1), {ReduceOp::kAvg})->wait();
    std::vector<int64_t> send(6);
    for (int i = 0; i < 6; ++i) send[i] = 100 * r + i;  // elements [2j, 2j+1] go to rank j
    a2a[r].assign(6, -1);
    pg.all_to_all(view(send.data(), 6), view(a2a[r].data(), 6))->wait();
    pg.barrier()->wait();
  });
  for (int r = 0; r < n; ++r) {
    CHECK(ag[r] == std::vector<int64_t>{0, 0, 1, 10, 2, 20});
    CHECK(rs[r] == std::vector<int64_t>{2 * r * 6, (2 * r + 1) * 6});  // sum over k of i*(k+1) = 6i
    CHECK(rs_avg[r][0] == 12.0f);
    CHECK(a2a[r] ==
          std::vector<int64_t>{2 * r, 2 * r + 1, 100 + 2 * r, 101 + 2 * r, 200 + 2 * r, 201 + 2 * r});
  }
}

TEST_CASE("gloo send/recv: both ranks send first, then receive; tags keep messages apart") {
  std::vector<std::vector<int32_t>> got(2);
  run_ranks(make_gloo_group, 2, [&](ProcessGroup& pg, int r) {
    std::vector<int32_t> a(100, r), b(3, 10 + r);
    got[r].assign(103, -1);
    auto s1 = pg.send(view(a.data(), 100), 1 - r, {7});
    auto s2 = pg.send(view(b.data(), 3), 1 - r, {8});
    auto r2 = pg.recv(view(got[r].data() + 100, 3), 1 - r, {8});
    auto r1 = pg.recv(view(got[r].data(), 100), 1 - r, {7});
    wait_all({s1, s2, r2, r1});
  });
  for (int r = 0; r < 2; ++r) {
    CHECK(got[r][0] == 1 - r);
    CHECK(got[r][99] == 1 - r);
    CHECK(got[r][100] == 10 + (1 - r));
  }
}

TEST_CASE("gloo: ops complete in issue order and carry sequence numbers") {
  const int n = 2;
  std::vector<std::vector<int>> order(n);
  std::vector<std::vector<std::string>> names(n);
  std::mutex mu;  // outlives the groups: callbacks may still run after wait() returned
  run_ranks(make_gloo_group, n, [&](ProcessGroup& pg, int r) {
    std::vector<std::vector<float>> bufs(12, std::vector<float>(5000, 1.0f));
    std::vector<WorkPtr> works;
    for (int i = 0; i < 12; ++i) {
      works.push_back(pg.all_reduce(view(bufs[i].data(), bufs[i].size())));
      works.back()->then([&order, &mu, i, r](Work&) {
        std::lock_guard<std::mutex> lock(mu);
        order[r].push_back(i);
      });
      names[r].push_back(works.back()->description());
    }
    wait_all(works);
    for (auto& b : bufs) CHECK(b[4999] == 2.0f);
  });
  for (int r = 0; r < n; ++r) {
    std::vector<int> expected(12);
    std::iota(expected.begin(), expected.end(), 0);
    CHECK(order[r] == expected);
    CHECK(names[r][0].find("#1") != std::string::npos);
    CHECK(names[r][11].find("#12") != std::string::npos);
  }
}

TEST_CASE("gloo: zero-length ops are no-ops and world size 1 works locally") {
  run_ranks(make_gloo_group, 2, [&](ProcessGroup& pg, int r) {
    std::vector<float> empty;
    CHECK(pg.all_reduce(view(empty.data(), 0))->wait());
    CHECK(pg.broadcast(view(empty.data(), 0), {1})->wait());
    CHECK(pg.send(view(empty.data(), 0), 1 - r)->wait());
    CHECK(pg.all_gather(view(empty.data(), 0), view(empty.data(), 0))->wait());
    CHECK(pg.all_to_all(view(empty.data(), 0), view(empty.data(), 0))->wait());
    std::vector<float> one{static_cast<float>(r)};
    pg.all_reduce(view(one.data(), 1))->wait();  // the group still works afterwards
    CHECK(one[0] == 1.0f);
  });
  run_ranks(make_gloo_group, 1, [&](ProcessGroup& pg, int) {
    std::vector<double> v{1.5, 2.5}, out(2, 0), rs(2, 0);
    CHECK(pg.all_reduce(view(v.data(), 2), {ReduceOp::kAvg})->wait());
    CHECK(v == std::vector<double>{1.5, 2.5});
    pg.all_gather(view(v.data(), 2), view(out.data(), 2))->wait();
    CHECK(out == v);
    pg.reduce_scatter(view(v.data(), 2), view(rs.data(), 2))->wait();
    CHECK(rs == v);
    CHECK(pg.barrier()->wait());
    CHECK_THROWS_AS(pg.send(view(v.data(), 2), 0), InvalidArgument);
  });
}

TEST_CASE("gloo: bad arguments are InvalidArgument from the call itself") {
  run_ranks(make_gloo_group, 2, [&](ProcessGroup& pg, int) {
    std::vector<float> f(4);
    std::vector<int32_t> i4(4), i8(8), i3(3);
    CHECK_THROWS_AS(pg.all_reduce(view(f.data(), 4), {ReduceOp::kBxor}), InvalidArgument);
    CHECK_THROWS_AS(pg.broadcast(view(f.data(), 4), {2}), InvalidArgument);
    CHECK_THROWS_AS(pg.reduce(view(f.data(), 4), {-1}), InvalidArgument);
    CHECK_THROWS_AS(pg.all_gather(view(i4.data(), 4), view(i4.data(), 4)), InvalidArgument);
    CHECK_THROWS_AS(pg.all_gather(view(i4.data(), 4), view(f.data(), 4)), InvalidArgument);
    CHECK_THROWS_AS(pg.reduce_scatter(view(i8.data(), 8), view(i3.data(), 3)), InvalidArgument);
    CHECK_THROWS_AS(pg.all_to_all(view(i3.data(), 3), view(i3.data(), 3)), InvalidArgument);
    CHECK_THROWS_AS(pg.send(view(f.data(), 4), 5), InvalidArgument);
    Buffer cuda{f.data(), 4, DType::kFloat32, Device{DeviceType::kCuda, 0}};
    CHECK_THROWS_AS(pg.all_reduce(cuda), InvalidArgument);
    // The group is unharmed by rejected calls.
    std::vector<float> one{1.0f};
    pg.all_reduce(view(one.data(), 1))->wait();
    CHECK(one[0] == 2.0f);
  });
}

TEST_CASE(
    "gloo: a recv that nobody matches is a TimeoutError naming the op and peer; the group stays broken") {
  std::promise<void> checked;
  auto done = checked.get_future().share();
  run_ranks(make_gloo_group, 2, [&](ProcessGroup& pg, int r) {
    std::vector<float> buf(4);
    if (r == 1) done.wait();  // stay connected until rank 0 has seen its timeout
    if (r == 0) {
      auto w = pg.recv(view(buf.data(), 4), 1, {3, Millis(300)});
      try {
        w->wait();
        FAIL("recv should have timed out");
      } catch (const TimeoutError& e) {
        std::string m = e.what();
        CHECK(m.find("recv #1") != std::string::npos);
        CHECK(m.find("rank 1") != std::string::npos);
      }
      CHECK_THROWS_AS(pg.all_reduce(view(buf.data(), 4))->wait(), TimeoutError);
      checked.set_value();
    }
    // Rank 1 sends nothing; its group sees the abort when it next communicates.
  });
}

TEST_CASE("gloo: ranks that disagree on sizes or roots get an error, not a crash") {
  run_ranks(make_gloo_group, 2, [&](ProcessGroup& pg, int r) {
    std::vector<float> buf(r == 0 ? 8 : 4);
    auto w = r == 0 ? pg.send(view(buf.data(), 8), 1, {0, Millis(500)})
                    : pg.recv(view(buf.data(), 4), 0, {0, Millis(500)});
    CHECK_THROWS_AS(w->wait(), Error);
  });
  run_ranks(make_gloo_group, 2, [&](ProcessGroup& pg, int r) {
    std::vector<float> buf(r == 0 ? 64 : 128);
    // The first rank to time out aborts; the other may see that as a lost connection instead.
    CHECK_THROWS_AS(pg.all_reduce(view(buf.data(), buf.size()), {ReduceOp::kSum, Millis(500)})->wait(),
                    Error);
  });
  run_ranks(make_gloo_group, 2, [&](ProcessGroup& pg, int r) {
    std::vector<float> buf(16);
    CHECK_THROWS_AS(pg.broadcast(view(buf.data(), 16), {r, Millis(500)})->wait(), Error);
  });
}

TEST_CASE("gloo: a peer that goes away is a NetworkError naming it, for this and every later op") {
  const int n = 3;
  std::vector<std::string> messages(n);
  std::vector<char> later_failed(n, 0);  // not vector<bool>: ranks (threads) write their own entry
  run_ranks(make_gloo_group, n, [&](ProcessGroup& pg, int r) {
    std::vector<float> buf(1000, 1.0f);
    pg.all_reduce(view(buf.data(), buf.size()))->wait();
    pg.barrier()->wait();
    if (r == 2) return;  // rank 2 leaves: its group is destroyed, its sockets close
    try {
      pg.all_reduce(view(buf.data(), buf.size()), {ReduceOp::kSum, Millis(30'000)})->wait();
    } catch (const NetworkError& e) {
      messages[r] = e.what();
    }
    try {
      pg.barrier()->wait();
    } catch (const Error&) {
      later_failed[r] = 1;
    }
  });
  for (int r = 0; r < 2; ++r) {
    INFO(messages[r]);
    CHECK(messages[r].find("all_reduce #3") != std::string::npos);
    CHECK(messages[r].find("rank 2") != std::string::npos);
    CHECK(later_failed[r]);
  }
}
