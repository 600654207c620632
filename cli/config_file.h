#pragma once
// JSON job configs (see configs/ and configs/ddp-launch.schema.json). Keys are the option names
// in snake_case; values are typed (integers, numbers of seconds, strings, booleans, an object for
// env, an array for command). Every error is an InvalidArgument naming the file, the line and
// the key, with a "did you mean" for unknown keys; malformed JSON reports line and column.
#include <string>

#include "cli/settings.h"

namespace ddp::cli {

// Parses `text` (named `path` in errors) into a layer.
SettingLayer parse_config(const std::string& text, const std::string& path);

// Reads and parses a file; a file that cannot be read is an InvalidArgument naming it.
SettingLayer load_config_file(const std::string& path);

}  // namespace ddp::cli
