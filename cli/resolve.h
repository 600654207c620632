#pragma once
// Turns layered settings (config file < DDP_LAUNCH_* < flags) into the agent's options: parses
// every value, resolves nproc (auto/gpu/cpu), fills node rank, node count and master address
// from Slurm or Open MPI when not given, rejects impossible combinations, and wraps .py programs
// in python3. Every error is an InvalidArgument naming the setting's source (flag, variable, or
// config file and line).
#include <string>
#include <vector>

#include "cli/settings.h"
#include "cli/values.h"
#include "launcher/agent.h"

namespace ddp::cli {

// DDP_LAUNCH_<NAME> variables as a layer. `env_names` are the names of the process's variables:
// a DDP_LAUNCH_ name that matches no option is an error with a "did you mean".
SettingLayer env_layer(const EnvLookup& env, const std::vector<std::string>& env_names);

// The merged layer: loads the config named by the flags or DDP_LAUNCH_CONFIG, then merges
// config < env < flags.
SettingLayer merge_settings(const SettingLayer& flags, const SettingLayer& env);

// `command` is the PROGRAM [ARGS...] from the command line (empty: the config's "command").
launcher::AgentOptions resolve_options(const SettingLayer& merged, std::vector<std::string> command,
                                       const EnvLookup& env);

}  // namespace ddp::cli
