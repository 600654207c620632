// The runtime's settings read from the environment (its ops are exercised through the process
// group: mpi_process_group_test.cc, alone and under mpirun).
#include "comm/mpi/mpi_runtime.h"

#include <doctest/doctest.h>

#include <cstdlib>

#include "common/error.h"

using namespace ddp;
using ddp::comm::mpi_backend::poll_budget_from_env;
using std::chrono::microseconds;

TEST_CASE(
    "DDP_MPI_POLL_US: the hand-off's poll, 50 us by default, 0 sleeps at once, outside 0..1 s refused") {
  unsetenv("DDP_MPI_POLL_US");
  CHECK(poll_budget_from_env() == microseconds(50));
  setenv("DDP_MPI_POLL_US", "0", 1);
  CHECK(poll_budget_from_env() == microseconds(0));
  setenv("DDP_MPI_POLL_US", "250", 1);
  CHECK(poll_budget_from_env() == microseconds(250));
  setenv("DDP_MPI_POLL_US", "-5", 1);
  CHECK_THROWS_WITH_AS(poll_budget_from_env(), doctest::Contains("DDP_MPI_POLL_US='-5'"), InvalidArgument);
  setenv("DDP_MPI_POLL_US", "1000001", 1);
  CHECK_THROWS_WITH_AS(poll_budget_from_env(), doctest::Contains("DDP_MPI_POLL_US='1000001'"),
                       InvalidArgument);
  setenv("DDP_MPI_POLL_US", "99999999999999999999999", 1);  // past int64
  CHECK_THROWS_WITH_AS(poll_budget_from_env(), doctest::Contains("DDP_MPI_POLL_US"), InvalidArgument);
  setenv("DDP_MPI_POLL_US", "1000000", 1);
  CHECK(poll_budget_from_env() == microseconds(1'000'000));
  setenv("DDP_MPI_POLL_US", "soon", 1);
  CHECK_THROWS_WITH_AS(poll_budget_from_env(), doctest::Contains("DDP_MPI_POLL_US"), InvalidArgument);
  unsetenv("DDP_MPI_POLL_US");
}
