#include "cli/run_id.h"

#include <doctest/doctest.h>

#include <map>

using namespace ddp;
using namespace ddp::cli;

namespace {

EnvLookup env_of(std::map<std::string, std::string> vars) {
  return [vars](const std::string& n) -> std::optional<std::string> {
    auto it = vars.find(n);
    if (it == vars.end()) return std::nullopt;
    return it->second;
  };
}

launcher::LaunchOptions layout(int nnodes, const std::string& rdzv_id = "none") {
  launcher::LaunchOptions l;
  l.nnodes_min = l.nnodes_max = nnodes;
  l.rdzv_id = rdzv_id;
  return l;
}

std::string run_id(launcher::LaunchOptions l, std::map<std::string, std::string> vars = {}) {
  resolve_run_id(env_of(std::move(vars)), l);
  return l.run_id;
}

}  // namespace

TEST_CASE("the scheduler's job id, as a valid run id") {
  CHECK(scheduler_job_id(env_of({})).empty());
  CHECK(scheduler_job_id(env_of({{"SLURM_JOB_ID", "4242"}})) == "4242");
  CHECK(scheduler_job_id(env_of({{"SLURM_JOB_ID", "4242"}, {"SLURM_STEP_ID", "0"}})) == "4242.0");
  CHECK(scheduler_job_id(env_of({{"PBS_JOBID", "77.pbs/srv x"}})) == "77.pbs_srv_x");
  CHECK(scheduler_job_id(env_of({{"LSB_JOBID", "9"}, {"PBS_JOBID", "8"}})) == "8");  // first found wins
  CHECK(scheduler_job_id(env_of({{"FLUX_JOB_ID",
                                  "\xc6\x92"
                                  "abc"}})) == "__abc");  // f58 'ƒ'
  CHECK(scheduler_job_id(env_of({{"COBALT_JOBID", ".hidden"}})) == "_hidden");
  CHECK(scheduler_job_id(env_of({{"SLURM_JOB_ID", std::string(500, '7')}})).size() == kMaxRunIdLength - 16);
  // whatever the scheduler says, the result passes the run-id check
  CHECK_NOTHROW(parse_run_id(scheduler_job_id(env_of({{"PBS_JOBID", "../../etc"}})), "x"));
}

TEST_CASE("--rdzv-id wins; several nodes share the scheduler's id or 'none'; one node gets a fresh one") {
  CHECK(run_id(layout(2, "job7"), {{"SLURM_JOB_ID", "1"}}) == "job7");
  CHECK(run_id(layout(1, "job7")) == "job7");
  CHECK(run_id(layout(2), {{"SLURM_JOB_ID", "1"}, {"SLURM_STEP_ID", "2"}}) == "1.2");
  CHECK(run_id(layout(2)) == "none");
  CHECK(run_id(layout(1)).size() == 16);
  CHECK(run_id(layout(1)) != run_id(layout(1)));
  CHECK(run_id(layout(1), {{"SLURM_JOB_ID", "1"}}).starts_with("1-"));
}

TEST_CASE("log directories: the run id, but never the shared 'none'") {
  auto l = layout(2);
  resolve_run_id(env_of({}), l);
  CHECK(l.log_run_dir.starts_with("none_"));
  auto m = layout(2, "job7");
  resolve_run_id(env_of({}), m);
  CHECK(m.log_run_dir == "job7");
}
