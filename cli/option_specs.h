#pragma once
// The one table of ddp-launch's settings. Each row drives four things at once: the command-line
// flag (--kebab-case, plus torchrun's --snake_case spelling), the DDP_LAUNCH_<NAME> environment
// variable, the JSON config key (snake_case) and its JSON Schema entry. Adding a setting here
// makes it exist everywhere; tests check the schema file agrees with this table.
#include <string>
#include <string_view>
#include <vector>

namespace ddp::cli {

enum class ValueKind {
  kInt,          // JSON integer; flag/env: decimal text
  kSeconds,      // JSON number; flag/env: decimal seconds ("0.5")
  kString,       // JSON string
  kIntOrString,  // JSON integer or string ("4", "auto", "1:4", "0:3,1:1")
  kBool,         // JSON true/false; flag: present; env: 1/0, true/false, yes/no, on/off
  kKeyValues,    // repeatable KEY=VALUE; JSON object of strings
  kStringList,   // JSON array of strings (config only: the command)
};

struct OptionSpec {
  std::string_view name;  // snake_case: config key; flag is --name with '-' for '_'
  ValueKind kind;
  std::string_view group;  // --help section
  std::string_view help;
  std::string_view default_text;  // shown in --help; empty: none
  std::string_view short_flag;    // "-r", or empty
  bool in_config = true;          // accepted as a JSON config key
  bool in_cli = true;             // accepted as a flag and a DDP_LAUNCH_ variable
};

const std::vector<OptionSpec>& option_specs();
const OptionSpec* find_option(std::string_view name);  // nullptr when unknown

std::string flag_name(std::string_view name);  // "nproc_per_node" -> "--nproc-per-node"
std::string env_name(std::string_view name);   // "nproc_per_node" -> "DDP_LAUNCH_NPROC_PER_NODE"
std::string_view kind_text(ValueKind kind);    // "integer", "number (seconds)", ...

}  // namespace ddp::cli
