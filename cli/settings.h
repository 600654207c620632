#pragma once
// Raw settings as text, before they become LaunchOptions, each remembering where it came from so
// that every error can name its source: a flag, a DDP_LAUNCH_ variable, or a config file's key
// and line. Layers are merged lowest first: config file < environment < command line.
#include <map>
#include <string>
#include <vector>

namespace ddp::cli {

struct SettingValue {
  std::vector<std::string> items;  // one item for scalars; KEY=VALUE items; the command's words
  std::string source;              // "--nproc-per-node", "DDP_LAUNCH_NNODES", "job.json line 3"
};

using SettingLayer = std::map<std::string, SettingValue>;  // option name -> value

// Later layers replace earlier ones, except KEY=VALUE lists, which merge (a later KEY wins).
SettingLayer merge_layers(const std::vector<SettingLayer>& lowest_first);

}  // namespace ddp::cli
