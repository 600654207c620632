#pragma once
// The run id of a launch: it names the log directory (<log-dir>/<run id>/attempt_<n>), the
// rendezvous keys and, without DDP_JOB_TOKEN, seeds the job token, so nodes of one job must agree
// on it and different jobs must not share it.
//
//   --rdzv-id given         that id, on every node;
//   several nodes, no id    the scheduler's job id (scheduler_job_id: every node of the step sees
//                           the same one), else torchrun's "none";
//   one node, no id         a fresh random id, prefixed with the scheduler's job id when there is
//                           one (two single-node jobs in one allocation stay apart).
// The log directory is the run id, except "none" (shared by every job without an id): then
// "none_<random>", per node, as torchrun names its log directories. Nothing here throws.
#include <string>

#include "cli/values.h"
#include "launcher/launch_options.h"

namespace ddp::cli {

// SLURM_JOB_ID (".SLURM_STEP_ID" appended under srun), else PBS_JOBID, LSB_JOBID, FLUX_JOB_ID or
// COBALT_JOBID, made a valid run id (other characters become '_', bounded length, no leading
// '.'); empty outside a scheduler.
std::string scheduler_job_id(const EnvLookup& env);

// Fills options.run_id and options.log_run_dir from options.rdzv_id and nnodes_max.
void resolve_run_id(const EnvLookup& env, launcher::LaunchOptions& options);

}  // namespace ddp::cli
