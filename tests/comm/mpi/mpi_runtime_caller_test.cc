// MpiRuntime's caller side (mpi_runtime_caller.cc) through a group, as every rank of an MPI job
// (mpirun -np 2 or 3; a singleton runs what needs no peer): small ops started on the caller's
// thread, ops not done within the poll parked, driven by their waiter or adopted by the MPI
// thread, and handed back when something else is queued.
#include "comm/mpi/mpi_runtime.h"

#include <doctest/doctest.h>

#include <chrono>
#include <future>
#include <mutex>
#include <thread>

#include "common/error.h"
#include "tests/comm/mpi/mpi_test_world.h"

using namespace ddp;
using namespace ddp::comm;
using namespace ddp::comm::mpi_test;

namespace {

// An all_reduce on every buffer, issued back to back without waiting: whether their Works
// finished in issue order (their callbacks ran before the barrier's Work finished).
bool issue_order_kept(ProcessGroup& pg, std::vector<std::vector<float>>& bufs) {
  std::vector<int> order;
  std::mutex mu;
  std::vector<WorkPtr> works;
  for (size_t i = 0; i < bufs.size(); ++i) {
    works.push_back(pg.all_reduce(view(bufs[i].data(), bufs[i].size())));
    works.back()->then([&order, &mu, i](Work&) {
      std::lock_guard<std::mutex> lock(mu);
      order.push_back(static_cast<int>(i));
    });
  }
  wait_all(works);
  pg.barrier()->wait();
  std::vector<int> expected(bufs.size());
  std::iota(expected.begin(), expected.end(), 0);
  std::lock_guard<std::mutex> lock(mu);
  return order == expected;
}

}  // namespace

TEST_CASE("mpi: ops complete in issue order") {
  auto pg = world();
  std::vector<std::vector<float>> bufs(16, std::vector<float>(4096, 1.0f));
  CHECK(issue_order_kept(*pg, bufs));
  CHECK(bufs[15][0] == static_cast<float>(pg->size()));
}

TEST_CASE("mpi: small collectives start on the caller's thread; mixed with large ones, order holds") {
  auto pg = world();
  pg->barrier()->wait();
  const uint64_t before = MpiRuntime::instance().ran_here();
  for (int i = 0; i < 100; ++i) {
    // A pause past the MPI thread's poll budget (50 us) lets it go idle first: back to back,
    // on a loaded machine (3 ranks on 2 cores under ASan, CI), every op can land while it still
    // polls after the last one, and all 100 went through it.
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
    std::vector<int32_t> v(3, world_rank() + i);
    pg->all_reduce(view(v.data(), v.size()))->wait();
    const int32_t want = world_size() * i + world_size() * (world_size() - 1) / 2;
    REQUIRE(v[2] == want);
  }
  // Each one finds the MPI thread idle unless it is descheduled past the pause.
  if (MpiRuntime::instance().thread_level() >= MPI_THREAD_SERIALIZED) {
    CHECK(MpiRuntime::instance().ran_here() > before);
  } else {
    CHECK(MpiRuntime::instance().ran_here() == before);  // only the MPI thread may call MPI
  }
  // Issued back to back without waiting: 16 B and 256 KiB alternate; the small ones run where
  // they can, the large ones on the MPI thread, and every Work still finishes in issue order.
  std::vector<std::vector<float>> bufs;
  for (int i = 0; i < 16; ++i) bufs.emplace_back(i % 2 == 0 ? 4 : 65536, static_cast<float>(i));
  CHECK(issue_order_kept(*pg, bufs));
  for (int i = 0; i < 16; ++i) CHECK(bufs[i].back() == static_cast<float>(i * pg->size()));
}

TEST_CASE("mpi: a small collective whose peer is late goes on on the MPI thread, and is right (3 ranks)" *
          doctest::skip(!multi())) {
  auto gate = make_mpi_group(setup(all_ranks(), "gate-late-peer"));
  auto pg = world();
  pg->barrier()->wait();
  std::vector<double> v(2, world_rank() + 1.0);
  if (world_rank() == 1) gate->barrier()->wait();  // late: until the others have looked
  WorkPtr w = pg->all_reduce(view(v.data(), v.size()));
  if (world_rank() != 1) {
    CHECK_FALSE(w->is_completed());  // rank 1 has not come: parked
    gate->barrier()->wait();
  }
  w->wait();
  CHECK(v[1] == world_size() * (world_size() + 1) / 2.0);
}

TEST_CASE(
    "mpi: a small collective past its deadline is a TimeoutError; the late rank completes it (3 ranks)" *
    doctest::skip(!multi())) {
  world()->barrier()->wait();
  auto gate = make_mpi_group(setup(all_ranks(), "gate-late-small"));
  auto pg = make_mpi_group(setup(all_ranks(), "late-small", Millis(300)));
  std::vector<float> v(4, 1.0f);
  if (world_rank() == 1) {
    gate->barrier()->wait();  // late until the others have timed out, but it does come
    CHECK(pg->all_reduce(view(v.data(), v.size()))->wait());
  } else {
    CHECK_THROWS_WITH_AS(pg->all_reduce(view(v.data(), v.size()))->wait(),
                         doctest::Contains("mpi all_reduce #1 in group 'late-small'"), TimeoutError);
    std::vector<float> x(4, 1.0f);  // the group stays broken
    CHECK_THROWS_AS(pg->all_reduce(view(x.data(), x.size()))->wait(), TimeoutError);
    gate->barrier()->wait();
  }
  world()->barrier()->wait();  // every rank again; the timed-out request completed meanwhile
}

// A caller's op not done within the poll (rank 1 late) is parked: its waiter drives it (the
// ranks waiting for rank 1 do), or the MPI thread adopts it. Each rank pauses past the MPI
// thread's poll first, so its op finds the thread idle (see above). Which of the two wins a
// round is a race: rounds go on (the same number on every rank, agreed each round) until every
// rank but rank 1 has driven one (200 at most), or 10 where only the MPI thread may call MPI.
TEST_CASE("mpi: a caller's op not done within the poll is driven to the end by its waiter (2+ ranks)" *
          doctest::skip(world_size() < 2)) {
  auto pg = world();
  const uint64_t before = MpiRuntime::instance().driven_here();
  const bool serialized = MpiRuntime::instance().thread_level() >= MPI_THREAD_SERIALIZED;
  int rounds = 0;
  for (bool all_drove = false; !all_drove && rounds < (serialized ? 200 : 10); ++rounds) {
    pg->barrier()->wait();
    std::this_thread::sleep_for(std::chrono::milliseconds(world_rank() == 1 ? 20 : 2));
    std::vector<double> v(2, world_rank() + 1.0);
    pg->all_reduce(view(v.data(), v.size()))->wait();
    CHECK(v[1] == world_size() * (world_size() + 1) / 2.0);
    std::vector<int> drove(1, world_rank() == 1 || MpiRuntime::instance().driven_here() > before ? 1 : 0);
    AllReduceOptions min;
    min.op = ReduceOp::kMin;
    pg->all_reduce(view(drove.data(), drove.size()), min)->wait();
    all_drove = serialized && drove[0] == 1;
  }
  if (!serialized) {
    CHECK(MpiRuntime::instance().driven_here() == before);  // only the MPI thread may call MPI
  } else if (world_rank() != 1) {
    INFO("rounds: ", rounds);
    CHECK(MpiRuntime::instance().driven_here() > before);
  }
}

TEST_CASE("mpi: a parked op nobody waits for still moves: the MPI thread adopts it (2+ ranks)" *
          doctest::skip(world_size() < 2)) {
  auto pg = world();
  pg->barrier()->wait();
  std::this_thread::sleep_for(std::chrono::milliseconds(world_rank() == 1 ? 100 : 2));
  std::vector<float> v(4, 1.0f);
  WorkPtr w = pg->all_reduce(view(v.data(), v.size()));
  const auto give_up = Clock::now() + std::chrono::seconds(30);
  while (!w->is_completed() && Clock::now() < give_up)
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  REQUIRE(w->is_completed());  // nobody tested it but the MPI thread
  CHECK(v[0] == static_cast<float>(world_size()));
}

TEST_CASE(
    "mpi: a wait shorter than the op it drives times out; the op goes on, a second wait has it (2+ ranks)" *
    doctest::skip(world_size() < 2)) {
  auto gate = make_mpi_group(setup(all_ranks(), "gate-short-wait"));
  auto pg = world();
  pg->barrier()->wait();
  std::vector<float> v(4, 1.0f);
  if (world_rank() == 1) {
    gate->barrier()->wait();  // late: until the others' short waits have timed out
    pg->all_reduce(view(v.data(), v.size()))->wait();
  } else {
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
    WorkPtr w = pg->all_reduce(view(v.data(), v.size()));
    CHECK_THROWS_AS(w->wait(Millis(30)), TimeoutError);
    gate->barrier()->wait();
    CHECK(w->wait());
  }
  CHECK(v[0] == static_cast<float>(world_size()));
}

// Rank 1 comes to the world's all_reduce late and to another group's at once. Elsewhere the
// world's op is driven by its waiter; the other group's, issued meanwhile from a second thread,
// must not wait for it: the waiter hands its op to the MPI thread, which runs both.
TEST_CASE("mpi: a waiter driving its op hands it over when another group's op comes (2+ ranks)" *
          doctest::skip(world_size() < 2)) {
  auto other = make_mpi_group(setup(all_ranks(), "other"));
  auto gate = make_mpi_group(setup(all_ranks(), "gate-hand-over"));
  other->barrier()->wait();
  world()->barrier()->wait();
  std::vector<float> late(4, 1.0f), soon(4, 2.0f);
  auto other_op = [&] {
    std::this_thread::sleep_for(
        std::chrono::milliseconds(50));  // (the waiter is in wait() by then, most often)
    other->all_reduce(view(soon.data(), soon.size()))->wait();
  };
  if (world_rank() == 1) {
    other_op();
    gate->barrier()->wait();  // late to the world's op: until the others have looked
    world()->all_reduce(view(late.data(), late.size()))->wait();
  } else {
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
    WorkPtr w = world()->all_reduce(view(late.data(), late.size()));
    auto done_first = std::async(std::launch::async, [&] {
      other_op();
      const bool first = !w->is_completed();
      gate->barrier()->wait();
      return first;
    });
    w->wait();
    CHECK(done_first.get());
  }
  CHECK(late[0] == static_cast<float>(world_size()));
  CHECK(soon[0] == 2.0f * static_cast<float>(world_size()));
}
