#pragma once
// Local ranks for a benchmark run without a launcher (`ddp-bench collective -n 2`): N processes
// re-executing this command line, meeting in a TCPStore hosted by this process (DDP_STORE,
// DDP_RUN_ID in their environment). Either N children with RANK/WORLD_SIZE/LOCAL_RANK, or one
// `mpirun -np N` (ranks from OMPI_COMM_WORLD_*) when an implementation measured needs MPI: the
// store is there for the others measured in the same run. A rank that fails takes the others
// down (they would wait for it until their timeout).
#include <string>
#include <vector>

namespace ddp::bench {

struct LocalRanksOptions {
  int world = 2;
  bool mpirun = false;  // one mpirun child instead of `world` children
  std::vector<std::string>
      args;  // the subcommand's argv (argv[0] its name); -n/--world-size dropped for mpirun
  std::string who = "ddp-bench";  // names this tool in messages
  // Each rank on a CPU of its own (the r-th this process may use; mpirun: --bind-to core), where
  // there are at least `world` of them; otherwise, or when false, the kernel places them. Unbound,
  // two ranks can stay stacked on one CPU after a peer's sleeping waits (Gloo's), and every wait
  // of ours is then a yield: 64 B all_reduces measured 2.1-2.3 us instead of 0.33-0.36.
  bool bind = true;
};

// The CPUs `world` ranks bind to (the first `world` this process may use), or none when there
// are fewer than `world`.
std::vector<int> rank_cpus(int world);

// Runs the ranks to the end; returns the worst exit status (128+signal for a signal).
int run_local_ranks(const LocalRanksOptions& options);

}  // namespace ddp::bench
