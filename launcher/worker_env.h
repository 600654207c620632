#pragma once
// The environment of one worker: exactly the variables torchrun sets, same names and meanings
// (docs/design.md "Worker environment"), plus the project's DDP_* variables, plus --env
// entries. Pure functions of their inputs (and of the launcher's own environment, which the
// worker inherits): the supervisor uses them to spawn, `--dry-run` to print.
//
// Order of application: the launcher's environment, then the variables below, then --env
// KEY=VALUE entries in order (so a user can override anything, OMP_NUM_THREADS included).
#include <string>
#include <utility>
#include <vector>

#include "launcher/launch_options.h"
#include "rendezvous/node_rendezvous.h"

namespace ddp::launcher {

using EnvList = std::vector<std::pair<std::string, std::string>>;

struct WorkerEnvInput {
  int local_rank = 0;
  int restart_count = 0;   // TORCHELASTIC_RESTART_COUNT
  std::string error_file;  // TORCHELASTIC_ERROR_FILE; empty: left out
};

// What the launcher sets for this worker, in a fixed order:
//   RANK LOCAL_RANK WORLD_SIZE LOCAL_WORLD_SIZE GROUP_RANK GROUP_WORLD_SIZE ROLE_NAME ROLE_RANK
//   ROLE_WORLD_SIZE MASTER_ADDR MASTER_PORT TORCHELASTIC_RESTART_COUNT TORCHELASTIC_MAX_RESTARTS
//   TORCHELASTIC_RUN_ID TORCHELASTIC_USE_AGENT_STORE=False TORCHELASTIC_ERROR_FILE
//   TORCH_NCCL_ASYNC_ERROR_HANDLING (1 unless set) OMP_NUM_THREADS (1 when unset and more
//   than one worker per node) [CUDA_VISIBLE_DEVICES with --virtual-local-rank, which also makes
//   LOCAL_RANK 0] [DDP_TIMELINE with --timeline] DDP_STORE DDP_JOB_TOKEN DDP_RUN_ID DDP_NODE_RANK, then
//   --env.
// Throws InvalidArgument when local_rank is outside the node's workers.
EnvList worker_env(const LaunchOptions& options, const rdzv::NodeAssignment& assignment,
                   const WorkerEnvInput& input);

// The complete "KEY=VALUE" environment for exec: `base` (the launcher's, environ) with `vars`
// applied; a later entry replaces an earlier one with the same key.
std::vector<std::string> merge_environ(char** base, const EnvList& vars);

// The run id workers see: the assignment's, else the options' resolved one.
std::string effective_run_id(const LaunchOptions& options, const rdzv::NodeAssignment& assignment);

}  // namespace ddp::launcher
