#include "common/env.h"

#include <algorithm>
#include <charconv>
#include <cstdlib>

#include "common/error.h"

namespace ddp::env {

std::optional<std::string> get(const std::string& name) {
  const char* v = std::getenv(name.c_str());
  if (v == nullptr || *v == '\0') return std::nullopt;
  return std::string(v);
}

std::string get_or(const std::string& name, const std::string& fallback) {
  return get(name).value_or(fallback);
}

std::optional<int64_t> get_int(const std::string& name) {
  auto v = get(name);
  if (!v) return std::nullopt;
  int64_t out = 0;
  const char* end = v->data() + v->size();
  auto [ptr, ec] = std::from_chars(v->data(), end, out);
  if (ec != std::errc() || ptr != end) {
    DDP_THROW(InvalidArgument, "environment variable ", name, "='", *v, "' is not an integer");
  }
  return out;
}

int64_t get_int_or(const std::string& name, int64_t fallback) { return get_int(name).value_or(fallback); }

std::optional<bool> parse_bool(const std::string& text) {
  std::string s = text;
  std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return std::tolower(c); });
  if (s == "1" || s == "true" || s == "yes" || s == "on") return true;
  if (s == "0" || s == "false" || s == "no" || s == "off") return false;
  return std::nullopt;
}

bool get_bool_or(const std::string& name, bool fallback) {
  auto v = get(name);
  if (!v) return fallback;
  if (auto b = parse_bool(*v)) return *b;
  DDP_THROW(InvalidArgument, "environment variable ", name, "='", *v,
            "' is not a boolean (use 1/0, true/false, yes/no, on/off)");
}

}  // namespace ddp::env
