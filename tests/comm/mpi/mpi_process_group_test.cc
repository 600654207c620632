// Runs as every rank of an MPI job (mpirun -np 3), or alone as an MPI singleton. Every rank runs
// the same test cases in the same order; each checks its own results.
#include "comm/mpi/mpi_process_group.h"

#include "comm/mpi/mpi_eager_limit.h"

#include <doctest/doctest.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <future>
#include <limits>
#include <numeric>
#include <thread>

#include "common/error.h"
#include "test_env.h"
#include "tests/comm/mpi/mpi_test_world.h"
#include "tests/comm/reduction_inputs.h"

using namespace ddp;
using namespace ddp::comm;
using ddp::comm::mpi_backend::eager_piece_bytes;
using ddp::comm::mpi_backend::mpi_eager_limit;
using ddp::comm::mpi_backend::MpiRuntime;
using namespace ddp::comm::mpi_test;
using ddp::test::kArithmeticOps;
using ddp::test::reduction_input;
using ddp::test::reduction_oracle_failure;
using ddp::test::reduction_result;

TEST_CASE("mpi: the thread level is the one requested, and ops work at any level") {
  const std::string requested = test_env::get_or("DDP_MPI_THREAD_LEVEL", "multiple");
  const int level = MpiRuntime::instance().thread_level();
  if (requested == "funneled") CHECK(level == MPI_THREAD_FUNNELED);
  if (requested == "multiple") CHECK(level == MPI_THREAD_MULTIPLE);
  CHECK(MpiRuntime::instance().initialized_by_us());
  std::vector<int32_t> v{1};
  world()->all_reduce(view(v.data(), 1))->wait();
  CHECK(v[0] == world_size());
}

// Elements per buffer: a few (our point-to-point all_reduce, DDP_MPI_P2P_BYTES) and past 64 KiB
// (MPI's own).
struct Counts {
  size_t f64, i64, i8, f16;
};

// Rank r's inputs (tests/comm/reduction_inputs.h): exact in every dtype; no rank's buffer is the
// result (MIN/MAX from 2 elements), no op's result another's.
template <typename T>
std::vector<T> inputs(ReduceOp op, int r, size_t count) {
  std::vector<T> v(count);
  for (size_t i = 0; i < count; ++i) v[i] = static_cast<T>(reduction_input(dtype_of<T>(), op, r, i));
  return v;
}

// The first element of `v` that is not the reduction over n ranks, or v.size(); v.size() + 1
// when the inputs themselves fail their self-check for this world and count.
template <typename T>
size_t first_wrong(const std::vector<T>& v, ReduceOp op, int n) {
  const std::string oracle = reduction_oracle_failure(dtype_of<T>(), op, n, 0, v.size());
  if (!oracle.empty()) {
    MESSAGE("the reference itself: ", oracle);
    return v.size() + 1;
  }
  for (size_t i = 0; i < v.size(); ++i) {
    if (static_cast<double>(v[i]) != reduction_result(dtype_of<T>(), op, n, i)) return i;
  }
  return v.size();
}

TEST_CASE("mpi all_reduce: every dtype and op, AVG, 16-bit floats; small (ours) and large (MPI's)") {
  auto pg = world();
  const int n = pg->size(), r = pg->rank();
  for (Counts c : {Counts{7, 5, 3, 4}, Counts{9000, 9000, 70000, 40000}}) {
    CAPTURE(c.i8);
    for (ReduceOp op : kArithmeticOps) {
      auto d = inputs<double>(op, r, c.f64);
      auto l = inputs<int64_t>(op, r, c.i64);
      auto b = inputs<int8_t>(op, r, c.i8);
      pg->all_reduce(view(d.data(), d.size()), {op})->wait();
      pg->all_reduce(view(l.data(), l.size()), {op})->wait();
      pg->all_reduce(view(b.data(), b.size()), {op})->wait();
      INFO("op ", to_string(op));
      CHECK(first_wrong(d, op, n) == d.size());  // exact: every value and result is a small integer
      CHECK(first_wrong(l, op, n) == l.size());
      CHECK(first_wrong(b, op, n) == b.size());
    }
    std::vector<int32_t> bits(c.i64, 7);
    bits[0] = 1 << r;
    pg->all_reduce(view(bits.data(), bits.size()), {ReduceOp::kBor})->wait();
    CHECK(bits[0] == (1 << n) - 1);
    pg->all_reduce(view(bits.data(), bits.size()), {ReduceOp::kBand})->wait();
    CHECK(bits.back() == 7);
    std::vector<uint16_t> h(c.f16, float_to_half(1.5f)), bf(c.f16);
    for (size_t i = 0; i < bf.size(); ++i)
      bf[i] = float_to_bfloat16(static_cast<float>(reduction_input(DType::kBFloat16, ReduceOp::kMax, r, i)));
    pg->all_reduce(Buffer{h.data(), h.size(), DType::kFloat16, {}}, {ReduceOp::kSum})->wait();
    pg->all_reduce(Buffer{bf.data(), bf.size(), DType::kBFloat16, {}}, {ReduceOp::kMax})->wait();
    CHECK(half_to_float(h.back()) == static_cast<float>(1.5 * n));
    size_t bf_wrong = 0;
    for (size_t i = 0; i < bf.size(); ++i)
      bf_wrong += bfloat16_to_float(bf[i]) != reduction_result(DType::kBFloat16, ReduceOp::kMax, n, i);
    CHECK(bf_wrong == 0);
    const std::string bf_oracle = reduction_oracle_failure(DType::kBFloat16, ReduceOp::kMax, n, 0, bf.size());
    CHECK_MESSAGE(bf_oracle.empty(), bf_oracle);
  }
}

TEST_CASE(
    "mpi all_reduce: min and max of NaNs and signed zeros come out bit for bit the same on every rank") {
  auto pg = world();
  const int r = pg->rank();
  const float nan = std::numeric_limits<float>::quiet_NaN();
  for (ReduceOp op : {ReduceOp::kMin, ReduceOp::kMax, ReduceOp::kSum}) {
    // Each rank's NaN, zero and ordinary values in a different place: the order of combining
    // decides which one a min/max of a NaN keeps.
    std::vector<float> v{r % 2 ? nan : 1.0f, r % 2 ? -0.0f : 0.0f, static_cast<float>(r) * 0.1f,
                         r == 0 ? nan : 2.0f};
    pg->all_reduce(view(v.data(), v.size()), {op})->wait();
    std::vector<int32_t> bits(v.size()), all(v.size() * static_cast<size_t>(pg->size()));
    std::memcpy(bits.data(), v.data(), v.size() * sizeof(float));
    pg->all_gather(view(bits.data(), bits.size()), view(all.data(), all.size()))->wait();
    for (int k = 1; k < pg->size(); ++k) {
      CAPTURE(k);
      CHECK(std::equal(all.begin(), all.begin() + 4, all.begin() + 4L * k));
    }
  }
}

TEST_CASE("mpi all_reduce: messages split into eager pieces around every boundary, each byte right") {
  const size_t limit = MpiRuntime::instance().call([] { return mpi_eager_limit(); });
  CHECK(limit > 0);  // Open MPI: its shared-memory and tcp eager limits, read through MPI_T
  CHECK(eager_piece_bytes(4096) == 4032);
  CHECK(eager_piece_bytes(65536) == 65472);
  CHECK(eager_piece_bytes(512) == 0);
  auto pg = world();
  const size_t piece = eager_piece_bytes(limit);
  // Whole, just past one piece (two), several, past kP2pMaxPieces (whole again), odd sizes.
  for (size_t bytes : {piece - 1, piece, piece + 1, 2 * piece + 7, 4 * piece, 4 * piece + 1, 3 * piece + 2}) {
    CAPTURE(bytes);
    std::vector<int8_t> v(bytes);
    for (size_t i = 0; i < bytes; ++i)
      v[i] = static_cast<int8_t>((i * 7 + static_cast<size_t>(pg->rank())) % 50);
    pg->all_reduce(view(v.data(), v.size()))->wait();
    bool right = true;
    for (size_t i = 0; i < bytes && right; ++i) {
      int want = 0;
      for (int r = 0; r < pg->size(); ++r) want += static_cast<int>((i * 7 + static_cast<size_t>(r)) % 50);
      right = v[i] == static_cast<int8_t>(want);
    }
    CHECK(right);
  }
}

TEST_CASE("mpi all_reduce: 1500 small ones in flight at once (past the runtime's 1024), each right") {
  auto pg = world();
  const int n = pg->size(), r = pg->rank();
  std::vector<std::vector<int32_t>> bufs(1500);
  std::vector<WorkPtr> works;
  for (size_t i = 0; i < bufs.size(); ++i) {
    bufs[i].assign(3, r + static_cast<int32_t>(i));
    works.push_back(pg->all_reduce(view(bufs[i].data(), bufs[i].size())));
  }
  wait_all(works);
  for (size_t i = 0; i < bufs.size(); ++i) {
    CAPTURE(i);
    REQUIRE(bufs[i][2] == n * static_cast<int32_t>(i) + n * (n - 1) / 2);
  }
}

TEST_CASE(
    "mpi all_reduce by halving and doubling: counts around the blocks, every dtype, AVG, the same bits") {
  // Every size ours, halving from 1 byte up (the plans' own test checks every group size).
  ::setenv("DDP_MPI_P2P_BYTES", "2147483647", 1);
  ::setenv("DDP_MPI_HALVING_BYTES", "1", 1);
  auto pg = make_mpi_group(setup(all_ranks(), "halving"));
  ::setenv("DDP_MPI_P2P_BYTES", "65536", 1);
  ::unsetenv("DDP_MPI_HALVING_BYTES");
  const int n = pg->size(), r = pg->rank();
  for (size_t count : {size_t{1}, size_t{2}, size_t{3}, size_t{5}, size_t{1001}, size_t{70001}}) {
    CAPTURE(count);
    std::vector<double> d(count);
    for (size_t i = 0; i < count; ++i) d[i] = static_cast<double>(i % 97) + r;
    pg->all_reduce(view(d.data(), d.size()), {ReduceOp::kAvg})->wait();
    bool right = true;
    for (size_t i = 0; i < count && right; ++i) right = d[i] == static_cast<double>(i % 97) + (n - 1) / 2.0;
    CHECK(right);
    auto b = inputs<int8_t>(ReduceOp::kMax, r, count + 3);
    pg->all_reduce(view(b.data(), b.size()), {ReduceOp::kMax})->wait();
    CHECK(first_wrong(b, ReduceOp::kMax, n) == b.size());
    // Float sums whose rounding depends on the order: every rank ends with the same bits.
    std::vector<float> f(count);
    for (size_t i = 0; i < count; ++i) f[i] = 1.0f / static_cast<float>(3 + i % 11 + 7 * r);
    pg->all_reduce(view(f.data(), f.size()))->wait();
    std::vector<float> all(count * static_cast<size_t>(n));
    pg->all_gather(view(f.data(), f.size()), view(all.data(), all.size()))->wait();
    for (int k = 1; k < n; ++k) {
      CAPTURE(k);
      CHECK(std::memcmp(all.data(), all.data() + count * static_cast<size_t>(k), count * sizeof(float)) == 0);
    }
  }
}

TEST_CASE("mpi rooted ops from a non-zero root, gathers, reduce_scatter, all_to_all, barrier") {
  auto pg = world();
  const int n = pg->size(), r = pg->rank(), root = n - 1;
  std::vector<float> bc(5, static_cast<float>(r));
  pg->broadcast(view(bc.data(), 5), {root})->wait();
  CHECK(bc[4] == static_cast<float>(root));
  std::vector<float> red(3, r + 1.0f);
  pg->reduce(view(red.data(), 3), {root, ReduceOp::kAvg})->wait();
  if (r == root) CHECK(red[0] == doctest::Approx((n + 1) / 2.0));
  std::vector<int32_t> mine{r, 10 * r}, all(2 * n, -1), gat(r == root ? 2 * n : 0, -1);
  pg->all_gather(view(mine.data(), 2), view(all.data(), all.size()))->wait();
  for (int k = 0; k < n; ++k) CHECK(all[2 * k + 1] == 10 * k);
  pg->gather(view(mine.data(), 2), view(gat.data(), gat.size()), {root})->wait();
  if (r == root) CHECK(gat == all);
  std::vector<int32_t> src(r == root ? 2 * n : 0), got(2, -1);
  std::iota(src.begin(), src.end(), 100);
  pg->scatter(view(src.data(), src.size()), view(got.data(), 2), {root})->wait();
  CHECK(got == std::vector<int32_t>{100 + 2 * r, 101 + 2 * r});
  std::vector<int64_t> in(2 * n), out(2);
  for (int i = 0; i < 2 * n; ++i) in[i] = i;
  pg->reduce_scatter(view(in.data(), in.size()), view(out.data(), 2), {ReduceOp::kSum})->wait();
  CHECK(out == std::vector<int64_t>{2 * r * n, (2 * r + 1) * n});
  std::vector<int32_t> send(n), recv(n, -1);
  for (int k = 0; k < n; ++k) send[k] = 100 * r + k;
  pg->all_to_all(view(send.data(), n), view(recv.data(), n))->wait();
  for (int k = 0; k < n; ++k) CHECK(recv[k] == 100 * k + r);
  CHECK(pg->barrier()->wait());
}

TEST_CASE("mpi send/recv: both neighbours send first; negative library tags work (3 ranks)" *
          doctest::skip(!multi())) {
  auto pg = world();
  const int n = pg->size(), r = pg->rank();
  const int next = (r + 1) % n, prev = (r + n - 1) % n;
  std::vector<double> out(1000, r), in(1000, -1);
  auto s = pg->send(view(out.data(), out.size()), next, {5});
  auto v = pg->recv(view(in.data(), in.size()), prev, {5});
  wait_all({s, v});
  CHECK(in[999] == prev);
  pg->monitored_barrier(Millis(30'000));  // tag -1 on the wire
}

TEST_CASE("mpi subgroups: members in any order, two groups driven from two threads (3 ranks)" *
          doctest::skip(!multi())) {
  // Group rank = position in the list, as in torch: world rank 2 is group rank 0.
  std::vector<int> members{2, 0};
  ProcessGroupPtr g = world_rank() == 1 ? nullptr : make_mpi_group(setup(members, "group/0"));
  if (g) {
    CHECK(g->rank() == (world_rank() == 2 ? 0 : 1));
    std::vector<int32_t> v{world_rank()};
    g->broadcast(view(v.data(), 1), {0})->wait();
    CHECK(v[0] == 2);
  }
  // A second full group: each rank drives the two groups from two threads; rank order of the
  // calls differs per rank, which must not deadlock.
  auto other = make_mpi_group(setup(all_ranks(), "group/1"));
  auto drive = [](ProcessGroupPtr pg) {
    for (int i = 0; i < 20; ++i) {
      std::vector<float> x(256, 1.0f);
      pg->all_reduce(view(x.data(), x.size()))->wait();
      if (x[255] != static_cast<float>(pg->size())) return false;
    }
    return true;
  };
  auto a = std::async(std::launch::async, drive, world());
  auto b = std::async(std::launch::async, drive, other);
  CHECK(a.get());
  CHECK(b.get());
}

TEST_CASE("mpi: zero-length ops, bad arguments") {
  auto pg = world();
  std::vector<float> empty, f(4);
  std::vector<int32_t> i3(3);
  CHECK(pg->all_reduce(view(empty.data(), 0))->wait());
  CHECK(pg->broadcast(view(empty.data(), 0), {0})->wait());
  CHECK(pg->all_gather(view(empty.data(), 0), view(empty.data(), 0))->wait());
  CHECK_THROWS_AS(pg->all_reduce(view(f.data(), 4), {ReduceOp::kBand}), InvalidArgument);
  CHECK_THROWS_AS(pg->broadcast(view(f.data(), 4), {world_size()}), InvalidArgument);
  CHECK_THROWS_AS(pg->all_gather(view(f.data(), 4), view(f.data(), 4 * world_size() + 1)), InvalidArgument);
  Buffer cuda{f.data(), 4, DType::kFloat32, Device{DeviceType::kCuda, 0}};
  CHECK_THROWS_AS(pg->all_reduce(cuda), InvalidArgument);
  std::vector<float> one{1.0f};
  pg->all_reduce(view(one.data(), 1))->wait();
  CHECK(one[0] == static_cast<float>(world_size()));
}

TEST_CASE("mpi: DDP_MPI_COLLECTIVES other than blocking or nonblocking is an error naming it") {
  ::setenv("DDP_MPI_COLLECTIVES", "sometimes", 1);
  CHECK_THROWS_WITH_AS(make_mpi_group(setup(all_ranks(), "world")), doctest::Contains("DDP_MPI_COLLECTIVES"),
                       InvalidArgument);
  ::unsetenv("DDP_MPI_COLLECTIVES");
}

TEST_CASE("mpi: DDP_MPI_CALLER_BYTES that is not a byte count is an error naming it, before MPI") {
  // (Empty is unset, as for every DDP_* variable: test_env::get.)
  for (std::string bad : {"-1", "4k", "99999999999999999999", "0x10"}) {
    CAPTURE(bad);
    ::setenv("DDP_MPI_CALLER_BYTES", bad.c_str(), 1);
    CHECK_THROWS_WITH_AS(make_mpi_group(setup(all_ranks(), "world")),
                         doctest::Contains("DDP_MPI_CALLER_BYTES"), InvalidArgument);
  }
  ::setenv("DDP_MPI_CALLER_BYTES", "4096", 1);  // as the cases above run
  world()->barrier()->wait();                   // every rank refused alike: still in step
}

TEST_CASE("mpi: DDP_MPI_P2P_BYTES that is not a byte count is an error naming it, before MPI") {
  // 2^31: its messages are MPI int counts (a wrapped count would send a few bytes of a buffer).
  for (std::string bad : {"-1", "64k", "0x10", "2147483648", "99999999999999999999"}) {
    CAPTURE(bad);
    ::setenv("DDP_MPI_P2P_BYTES", bad.c_str(), 1);
    CHECK_THROWS_WITH_AS(make_mpi_group(setup(all_ranks(), "world")), doctest::Contains("DDP_MPI_P2P_BYTES"),
                         InvalidArgument);
  }
  ::setenv("DDP_MPI_P2P_BYTES", "65536", 1);  // as the cases above run
  world()->barrier()->wait();
}

TEST_CASE("mpi: DDP_MPI_HALVING_BYTES that is not a byte count is an error naming it, before MPI") {
  for (std::string bad : {"-1", "128k", "0x10", "1e6", "99999999999999999999"}) {
    CAPTURE(bad);
    ::setenv("DDP_MPI_HALVING_BYTES", bad.c_str(), 1);
    CHECK_THROWS_WITH_AS(make_mpi_group(setup(all_ranks(), "world")),
                         doctest::Contains("DDP_MPI_HALVING_BYTES"), InvalidArgument);
  }
  ::unsetenv("DDP_MPI_HALVING_BYTES");
  world()->barrier()->wait();  // every rank refused alike: still in step
}

TEST_CASE("mpi: DDP_MPI_CALLER_BYTES=0 and DDP_MPI_P2P_BYTES=0 leave every op to the MPI thread") {
  ::setenv("DDP_MPI_CALLER_BYTES", "0", 1);
  ::setenv("DDP_MPI_P2P_BYTES", "0", 1);
  auto pg = make_mpi_group(setup(all_ranks(), "world"));
  ::setenv("DDP_MPI_CALLER_BYTES", "4096", 1);  // read when a group is made: the next ones use it
  ::setenv("DDP_MPI_P2P_BYTES", "65536", 1);    // as the cases above run
  const uint64_t before = MpiRuntime::instance().ran_here();
  for (int i = 0; i < 20; ++i) {
    std::vector<int32_t> v(1, 1);
    pg->all_reduce(view(v.data(), v.size()))->wait();
    REQUIRE(v[0] == world_size());
  }
  CHECK(MpiRuntime::instance().ran_here() == before);
}

TEST_CASE("mpi: a group larger than the MPI world is a BackendError, not a hang") {
  std::vector<int> too_many(world_size() + 1);
  std::iota(too_many.begin(), too_many.end(), 0);
  GroupSetup s = setup(all_ranks(), "too-big");
  s.size = world_size() + 1;
  s.global_ranks = too_many;
  CHECK_THROWS_AS(make_mpi_group(s), BackendError);
}

TEST_CASE("mpi: an unmatched recv times out naming the op; the group stays broken (3 ranks)" *
          doctest::skip(!multi())) {
  auto pg = make_mpi_group(setup(all_ranks(), "group/timeout", Millis(60'000)));
  std::vector<int32_t> v(4, 7);
  if (pg->rank() == 0) {
    auto w = pg->recv(view(v.data(), 4), 1, {42, Millis(300)});
    try {
      w->wait();
      FAIL("recv should have timed out");
    } catch (const TimeoutError& e) {
      CHECK(std::string(e.what()).find("recv #1") != std::string::npos);
    }
    CHECK_THROWS_AS(pg->barrier()->wait(), TimeoutError);
  }
  // The timed-out recv was cancelled, so MPI still finalizes cleanly at exit (mpirun would fail
  // this test otherwise).
  world()->barrier()->wait();
}

TEST_CASE(
    "mpi: a blocking world collective past its deadline is a TimeoutError, not a hang; the thread "
    "is free again once the late rank arrives (3 ranks)" *
    doctest::skip(!multi())) {
  // A second group named "world" runs its collectives blocking (the first world() is warm).
  world()->barrier()->wait();
  // 256 KiB: above DDP_MPI_P2P_BYTES, so the blocking call (smaller ones are nonblocking).
  auto pg = make_mpi_group(setup(all_ranks(), "world", Millis(400)));
  std::vector<float> v(65536, 1.0f);
  if (world_rank() == 1) {
    std::this_thread::sleep_for(std::chrono::milliseconds(2500));  // late, but it does come
    CHECK(pg->all_reduce(view(v.data(), v.size()))->wait());
    CHECK(v[0] == static_cast<float>(world_size()));
  } else {
    try {
      pg->all_reduce(view(v.data(), v.size()))->wait();
      FAIL("all_reduce should have timed out");
    } catch (const TimeoutError& e) {
      CHECK(std::string(e.what()).find("mpi all_reduce #1 in group 'world'") != std::string::npos);
    }
    // The MPI thread is still inside MPI_Allreduce: new ops fail at once, without reaching MPI
    // (so no rank counts them), until the late rank's arrival lets the call return.
    std::vector<float> x(4, 1.0f);
    bool refused = false;
    try {
      world()->all_reduce(view(x.data(), 4))->wait();
    } catch (const TimeoutError& e) {
      refused = std::string(e.what()).find("stuck in mpi all_reduce #1") != std::string::npos;
    }
    CHECK(refused);
    // The group whose op timed out stays broken, even after the call returned.
    std::this_thread::sleep_for(std::chrono::milliseconds(3000));
    CHECK_THROWS_AS(pg->barrier()->wait(), TimeoutError);
  }
  // Everyone meets again on the world group once the stuck call returned.
  bool met = false;
  for (int i = 0; i < 200 && !met; ++i) {
    try {
      world()->barrier()->wait();
      met = true;
    } catch (const TimeoutError&) {
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
  }
  CHECK(met);
}
