#pragma once
// How the conformance suite gets its ranks, for whichever backend it runs against
// (DDP_CONFORMANCE_BACKEND, set per ctest: conformance_tcp, conformance_gloo, ...):
// - threads as ranks over one HashStore (tcp, gloo): fast, for the big matrix;
// - processes as ranks: fork()ed children joining through init_process_group(env://) with
//   DDP_STORE pointing at a TCPStore this process hosts; each child reports through it;
// - under mpirun (the mpi backend) or a launcher (RANK and WORLD_SIZE set: ddp-launch across
//   network namespaces, tests/netns): the launched ranks themselves, one default group for
//   the run.
// A rank that hangs is killed at the harness deadline and reported, so no test hangs.
#include <functional>
#include <string>
#include <vector>

#include "comm/group_factory.h"
#include "comm/process_group.h"

namespace ddp::comm::conformance {

const std::string& backend_under_test();
bool threads_as_ranks();  // the backend can run several ranks in one process
bool under_mpirun();      // or under a launcher: see above
bool gpu_visible();
// Under mpirun: the default group over MPI_COMM_WORLD, built once for the whole run.
ProcessGroupPtr mpirun_world();
// Collective timeout the suite gives its groups: long enough for ASan on a loaded machine.
inline constexpr Millis kSuiteTimeout{120'000};

// Threads as ranks. fn runs once per rank with that rank's world; returns its failures. A
// rank whose group cannot be built reports that as a failure.
using ThreadFn = std::function<std::vector<std::string>(GroupFactory&)>;
std::vector<std::string> run_threads(int world, const ThreadFn& fn, Millis timeout = kSuiteTimeout);

// Runs fn(group, n) on worlds of each size n in `worlds`: threads as ranks, or under mpirun on
// subgroups {0..n-1} of the MPI world (sizes above it are left out). Returns every failure,
// prefixed by the world size.
using WorldFn = std::function<std::vector<std::string>(ProcessGroup& group, int n)>;
std::vector<std::string> run_worlds(const std::vector<int>& worlds, const WorldFn& fn);

struct ProcessOptions {
  int world = 2;
  Millis timeout = kSuiteTimeout;  // the group's collective timeout (DDP_TIMEOUT_MS)
  Millis deadline{240'000};        // after this every child still running is SIGKILLed
  std::vector<int> expect_killed;  // ranks that kill themselves: checked to die of SIGKILL, unreported
  bool tolerate_abort = false;     // a rank dying of SIGABRT is no failure (still: no hang)
};
// Processes as ranks. body runs on every rank with the default group (built by
// init_process_group(env://) in each child); returns "" or what failed. Returns the failures of
// every rank (fork) or of this rank (mpirun); a missing report or a hang is a failure too.
using ProcessFn = std::function<std::string(ProcessGroup& world)>;
std::vector<std::string> run_processes(const ProcessOptions& options, const ProcessFn& body);

}  // namespace ddp::comm::conformance
