#pragma once
// Turns layered settings (config file < PET_* < DDP_LAUNCH_* < flags) into the agent's options:
// parses every value, resolves nproc (auto/gpu/cpu), fills node rank, node count and master
// address from Slurm or Open MPI when not given, rejects impossible combinations, picks the run
// id (--rdzv-id, the scheduler's job id, or a fresh one), and wraps .py programs in the Python
// interpreter ($PYTHON_EXEC, else python3). Every error is an InvalidArgument naming the
// setting's source (flag, variable, or config file and line).
#include <string>
#include <vector>

#include "cli/settings.h"
#include "cli/values.h"
#include "launcher/agent.h"

namespace ddp::cli {

// DDP_LAUNCH_<NAME> variables as a layer, and under them torchrun's PET_<NAME> (how torchrun
// and Kubeflow's PyTorchJob pass flags through the environment): a DDP_LAUNCH_ variable wins
// over the PET_ variable of the same option. `env_names` are the names of the process's
// variables: a DDP_LAUNCH_ name that matches no option is an error with a "did you mean"; PET_
// names we do not know are left alone (they belong to torchrun).
SettingLayer env_layer(const EnvLookup& env, const std::vector<std::string>& env_names);

// The merged layer: loads the config named by the flags or DDP_LAUNCH_CONFIG, then merges
// config < env < flags.
SettingLayer merge_settings(const SettingLayer& flags, const SettingLayer& env);

// `command` is the PROGRAM [ARGS...] from the command line (empty: the config's "command").
// Settings accepted but ignored (torchrun's --standalone with --rdzv-*/--node-rank, ...) add a
// line to `warnings` when given.
launcher::AgentOptions resolve_options(const SettingLayer& merged, std::vector<std::string> command,
                                       const EnvLookup& env, std::vector<std::string>* warnings = nullptr);

}  // namespace ddp::cli
