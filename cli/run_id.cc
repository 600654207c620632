#include "cli/run_id.h"

#include <cctype>
#include <string_view>

#include "launcher/agent.h"

namespace ddp::cli {
namespace {

constexpr size_t kRandomSuffix = 16;  // room kept for "-<random>" within kMaxRunIdLength

}  // namespace

std::string scheduler_job_id(const EnvLookup& env) {
  std::string id;
  if (auto j = env("SLURM_JOB_ID"); j && !j->empty()) {
    id = *j;
    if (auto step = env("SLURM_STEP_ID"); step && !step->empty()) id += "." + *step;
  } else {
    for (const char* var : {"PBS_JOBID", "LSB_JOBID", "FLUX_JOB_ID", "COBALT_JOBID"}) {
      if (auto v = env(var); v && !v->empty()) {
        id = *v;
        break;
      }
    }
  }
  for (char& c : id) {
    if (!std::isalnum(static_cast<unsigned char>(c)) &&
        std::string_view("._-:@+").find(c) == std::string_view::npos)
      c = '_';
  }
  if (id.size() > kMaxRunIdLength - kRandomSuffix) id.resize(kMaxRunIdLength - kRandomSuffix);
  if (id.starts_with(".")) id[0] = '_';
  return id;
}

void resolve_run_id(const EnvLookup& env, launcher::LaunchOptions& l) {
  const std::string sched = scheduler_job_id(env);
  l.run_id = l.rdzv_id;
  if (l.rdzv_id == "none" && l.nnodes_max == 1) {
    l.run_id = sched.empty() ? launcher::random_hex(8) : sched + "-" + launcher::random_hex(4);
  } else if (l.rdzv_id == "none" && !sched.empty()) {
    l.run_id = sched;
  }
  l.log_run_dir = l.run_id == "none" ? "none_" + launcher::random_hex(4) : l.run_id;
}

}  // namespace ddp::cli
