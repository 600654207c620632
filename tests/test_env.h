#pragma once
// Environment reads for test programs (their own variables, such as DDP_TEST_BACKEND, and
// what a launcher gave them); libraries and tools read through common/settings.h instead.
#include <cstdint>
#include <cstdlib>
#include <optional>
#include <string>

namespace ddp::test_env {

inline std::optional<std::string> get(const std::string& name) {
  const char* v = std::getenv(name.c_str());
  if (v == nullptr || *v == '\0') return std::nullopt;
  return std::string(v);
}

inline std::string get_or(const std::string& name, const std::string& fallback) {
  return get(name).value_or(fallback);
}

inline int64_t get_int_or(const std::string& name, int64_t fallback) {
  auto v = get(name);
  return v ? std::stoll(*v) : fallback;
}

}  // namespace ddp::test_env
