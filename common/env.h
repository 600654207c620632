#pragma once
// Typed reads of environment variables. A variable that is set but malformed is an
// InvalidArgument naming the variable and its value, never silently the default.
#include <cstdint>
#include <optional>
#include <string>

namespace ddp::env {

std::optional<std::string> get(const std::string& name);  // unset or empty -> nullopt
std::string get_or(const std::string& name, const std::string& fallback);
std::optional<int64_t> get_int(const std::string& name);
int64_t get_int_or(const std::string& name, int64_t fallback);
bool get_bool_or(const std::string& name, bool fallback);  // 1/0, true/false, yes/no, on/off
// 1/0, true/false, yes/no, on/off in any case; nullopt for anything else (the empty string too).
std::optional<bool> parse_bool(const std::string& text);

}  // namespace ddp::env
