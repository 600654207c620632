// JSON job configs: parse_config, then resolve_options over what it accepted (every value
// parser of the CLI). Bad input must be an InvalidArgument, nothing else.
#include <cstddef>
#include <cstdint>
#include <string>

#include "cli/config_file.h"
#include "cli/resolve.h"
#include "common/error.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  try {
    ddp::cli::SettingLayer layer = ddp::cli::parse_config(text, "fuzz.json");
    layer.erase("dry_run");  // resolve must not print or start anything
    auto no_env = [](const std::string&) -> std::optional<std::string> { return std::nullopt; };
    ddp::cli::resolve_options(layer, {}, no_env);
  } catch (const ddp::InvalidArgument&) {
  }
  return 0;
}
