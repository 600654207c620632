#pragma once
// Ports to hand to another process (a launcher's MASTER_PORT, a test's endpoint): free when
// checked, and chosen where nothing else is likely to take them before that process binds.
// A port from bind(0) comes from the kernel's ephemeral range, which it hands to every other
// bind(0) and outgoing connection on the machine: between the check and the other process's
// bind, any of them can take it (c10d then fails with "Address already in use", or connects
// to a stranger). These ports come at random from outside that range.
#include <cstdint>
#include <string>
#include <utility>

namespace ddp::net {

// The kernel's ephemeral port range (/proc/sys/net/ipv4/ip_local_port_range; 32768-60999, the
// kernel's default, when that cannot be read).
std::pair<int, int> ephemeral_port_range();

// That file's text ("LOW<whitespace>HIGH"): the range, or 32768-60999 for anything else (not two
// numbers, out of 1..65535, LOW above HIGH, trailing text).
std::pair<int, int> parse_port_range(const std::string& text);

// A port p such that p .. p + count - 1 are free on every interface now (each bound once,
// dual-stack where IPv6 is available, and released), chosen at random from the larger gap
// between 10000 and 65535 outside the ephemeral range; bind(0)'s port when that gap is under
// 1000 ports or 200 tries find none. NetworkError when even bind(0) fails.
uint16_t pick_free_port(int count = 1);

}  // namespace ddp::net
