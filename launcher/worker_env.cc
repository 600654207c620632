#include "launcher/worker_env.h"

#include <cstdlib>
#include <cstring>
#include <string_view>
#include <unordered_map>

#include "common/error.h"
#include "common/machine.h"
#include "common/settings.h"

namespace ddp::launcher {

std::string effective_run_id(const LaunchOptions& options, const rdzv::NodeAssignment& assignment) {
  if (!assignment.run_id.empty()) return assignment.run_id;
  return options.run_id.empty() ? options.rdzv_id : options.run_id;
}

namespace {

// torchrun's --virtual-local-rank: the worker sees one GPU, its own, as device 0: entry
// <local rank> of the launcher's CUDA_VISIBLE_DEVICES, else the index itself.
std::string visible_device(int local_rank) {
  const char* visible = std::getenv("CUDA_VISIBLE_DEVICES");
  if (visible == nullptr || *visible == '\0') return std::to_string(local_rank);
  std::string_view rest = visible;
  for (int i = 0;; ++i) {
    const size_t comma = rest.find(',');
    if (i == local_rank) return std::string(rest.substr(0, comma));
    DDP_CHECK(comma != std::string_view::npos, "--virtual-local-rank: local rank ", local_rank,
              " has no entry in CUDA_VISIBLE_DEVICES='", visible, "'");
    rest.remove_prefix(comma + 1);
  }
}

}  // namespace

EnvList worker_env(const LaunchOptions& options, const rdzv::NodeAssignment& a, const WorkerEnvInput& input) {
  DDP_CHECK(input.local_rank >= 0 && input.local_rank < a.local_world_size, "local rank ", input.local_rank,
            " outside the node's ", a.local_world_size, " workers");
  const int rank = a.rank_offset + input.local_rank;
  const std::string run_id = effective_run_id(options, a);
  std::string master_addr = a.master_addr;
  if (master_addr.empty()) master_addr = options.master_addr.empty() ? "127.0.0.1" : options.master_addr;
  auto s = [](auto v) { return std::to_string(v); };

  EnvList env = {
      {"RANK", s(rank)},
      {"LOCAL_RANK", options.virtual_local_rank ? "0" : s(input.local_rank)},
      {"WORLD_SIZE", s(a.world_size)},
      {"LOCAL_WORLD_SIZE", s(a.local_world_size)},
      {"GROUP_RANK", s(a.node_rank)},
      {"GROUP_WORLD_SIZE", s(a.nnodes)},
      // One role per job: role ranks are the global ranks.
      {"ROLE_NAME", options.role},
      {"ROLE_RANK", s(rank)},
      {"ROLE_WORLD_SIZE", s(a.world_size)},
      {"MASTER_ADDR", master_addr},
      {"MASTER_PORT", s(a.master_port)},
      {"TORCHELASTIC_RESTART_COUNT", s(input.restart_count)},
      {"TORCHELASTIC_MAX_RESTARTS", s(options.max_restarts)},
      {"TORCHELASTIC_RUN_ID", run_id},
      // PyTorch's rank 0 hosts its own TCPStore on MASTER_PORT. torchrun says True where its agent
      // serves a c10d TCPStore there; ours speaks another protocol on another port, so True would
      // leave every PyTorch rank waiting for a server that never answers (docs/launcher.md).
      {"TORCHELASTIC_USE_AGENT_STORE", "False"},
  };
  if (!input.error_file.empty()) env.emplace_back("TORCHELASTIC_ERROR_FILE", input.error_file);
  // torchrun sets this unless the user did (a hung NCCL collective then aborts the worker).
  const char* nccl_aeh = std::getenv("TORCH_NCCL_ASYNC_ERROR_HANDLING");
  env.emplace_back("TORCH_NCCL_ASYNC_ERROR_HANDLING", nccl_aeh != nullptr ? nccl_aeh : "1");
  // torchrun: several workers per node each spawning one OpenMP thread per core oversubscribe.
  if (std::getenv("OMP_NUM_THREADS") == nullptr && a.local_world_size > 1) {
    env.emplace_back("OMP_NUM_THREADS", "1");
  }
  // The CPUs the node's workers share, as the launcher sees them (its affinity: a container's
  // cpuset, a Slurm allocation), unless the user said: a worker bound to one of them later still
  // knows how many its node has (common/machine.h: local_cpus).
  if (!settings::get(settings::kLocalCpus)) {
    if (const int cpus = affinity_cpus(); cpus > 0) env.emplace_back(settings::kLocalCpus.name, s(cpus));
  }
  if (options.virtual_local_rank) env.emplace_back("CUDA_VISIBLE_DEVICES", visible_device(input.local_rank));
  if (!options.timeline.empty()) env.emplace_back(settings::kTimeline.name, options.timeline);
  if (!a.store_endpoint.empty()) env.emplace_back(settings::kStore.name, a.store_endpoint);
  if (!a.job_token.empty()) env.emplace_back(settings::kJobToken.name, a.job_token);
  if (options.rdzv_backend == RdzvBackend::kEtcd) {  // the TLS files of an etcd+https:// DDP_STORE
    if (!options.etcd.cacert.empty()) env.emplace_back(settings::kEtcdCacert.name, options.etcd.cacert);
    if (!options.etcd.cert.empty()) env.emplace_back(settings::kEtcdCert.name, options.etcd.cert);
    if (!options.etcd.key.empty()) env.emplace_back(settings::kEtcdKey.name, options.etcd.key);
  }
  env.emplace_back(settings::kRunId.name, run_id);
  env.emplace_back(settings::kNodeRank.name, s(a.node_rank));
  env.emplace_back(settings::kElasticRound.name, s(a.round));
  for (const auto& kv : options.env) env.push_back(kv);
  return env;
}

std::vector<std::string> merge_environ(char** base, const EnvList& vars) {
  std::vector<std::string> out;
  std::unordered_map<std::string, size_t> index;  // key -> position in out
  auto put = [&](std::string key, std::string entry) {
    auto [it, inserted] = index.emplace(std::move(key), out.size());
    if (inserted) {
      out.push_back(std::move(entry));
    } else {
      out[it->second] = std::move(entry);
    }
  };
  for (char** e = base; e != nullptr && *e != nullptr; ++e) {
    const char* eq = std::strchr(*e, '=');
    if (eq == nullptr) continue;
    put(std::string(*e, static_cast<size_t>(eq - *e)), *e);
  }
  for (const auto& [key, value] : vars) put(key, detail::str(key, '=', value));
  return out;
}

}  // namespace ddp::launcher
