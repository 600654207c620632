#include "common/free_port.h"

#include <algorithm>
#include <fstream>
#include <random>
#include <sstream>
#include <vector>

#include "common/auth.h"
#include "common/error.h"
#include "common/socket.h"

namespace ddp::net {
namespace {

constexpr int kLowest = 10000;  // below: well-known services (5432, 6379, 8080, ...)
constexpr int kMinGap = 1000;

// All of p .. p + count - 1 bound at once (and released on return).
bool all_free(int p, int count) {
  std::vector<Fd> held;
  try {
    for (int i = 0; i < count; ++i) {
      held.push_back(
          listen_tcp({.host = "", .port = static_cast<uint16_t>(p + i), .backlog = 1, .reuse_addr = false}));
    }
    return true;
  } catch (const Error&) {
    return false;
  }
}

}  // namespace

std::pair<int, int> parse_port_range(const std::string& text) {
  constexpr std::pair<int, int> kDefault{32768, 60999};
  std::istringstream in(text);
  long lo = 0, hi = 0;
  std::string rest;
  if (!(in >> lo >> hi) || (in >> rest) || lo < 1 || hi > 65535 || lo > hi) return kDefault;
  return {static_cast<int>(lo), static_cast<int>(hi)};
}

std::pair<int, int> ephemeral_port_range() {
  std::ifstream f("/proc/sys/net/ipv4/ip_local_port_range");
  std::stringstream text;
  text << f.rdbuf();
  return parse_port_range(text.str());
}

uint16_t pick_free_port(int count) {
  count = std::max(count, 1);
  const auto [lo, hi] = ephemeral_port_range();
  const int last = 65535 - (count - 1);
  // p .. p + count - 1 all in the gap: below the range, p + count - 1 < lo.
  const int below = std::max(0, lo - kLowest - (count - 1)), above = std::max(0, last - hi);
  const int first = below >= above ? kLowest : hi + 1;
  const int span = std::max(below, above);
  if (span >= kMinGap) {
    std::mt19937 gen(static_cast<uint32_t>(auth::random_u64()));
    std::uniform_int_distribution<int> pick(first, first + span - 1);
    for (int tries = 0; tries < 200; ++tries) {
      const int p = pick(gen);
      if (all_free(p, count)) return static_cast<uint16_t>(p);
    }
  }
  for (int tries = 0; tries < 100; ++tries) {
    Fd s = listen_tcp({.host = "", .port = 0, .backlog = 1, .reuse_addr = false});
    const uint16_t p = local_port(s.get());
    s = Fd();
    if (static_cast<int>(p) <= last && all_free(p, count)) return p;
  }
  DDP_THROW(NetworkError, "no ", count, " free consecutive TCP port(s) found");
}

}  // namespace ddp::net
