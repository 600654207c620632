#pragma once
#include <sstream>

namespace ddp::comm::conformance {

template <typename F>
std::string compare(const Array& a, size_t first, size_t count, F&& expected, const std::string& what) {
  std::ostringstream os;
  size_t bad = 0;
  for (size_t i = 0; i < count; ++i) {
    const double want = expected(i);
    const double got = a.get(first + i);
    if (got != want) {
      if (bad < 4) os << (bad ? "; " : "") << "[" << i << "] got " << got << " want " << want;
      ++bad;
    }
  }
  if (bad == 0) return "";
  return what + ": " + std::to_string(bad) + " of " + std::to_string(count) + " elements wrong: " + os.str();
}

}  // namespace ddp::comm::conformance
