// The tcp backend's message header check (comm/tcp/wire_header.h), the one judge of 24 bytes
// read off a peer's socket, and the unexpected-message budget: pure functions, never throwing.
// A header it accepts must be one the socket engine can act on.
#include <cstddef>
#include <cstdint>
#include <cstring>

#include "comm/tcp/wire_header.h"

using namespace ddp::comm::tcp;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string verdict = check_header(data, size);
  if (size == sizeof(WireHeader) && verdict.empty()) {
    WireHeader h;
    std::memcpy(&h, data, sizeof h);
    if (h.magic != kMsgMagic || h.bytes > kMaxMessage || h.channel > static_cast<uint8_t>(Channel::kBye)) {
      __builtin_trap();  // accepted something the engine cannot handle
    }
  }
  if (size >= 24) {
    uint64_t v[3];
    std::memcpy(v, data, sizeof v);
    check_unexpected(v[0], v[1], v[2]);
  }
  return 0;
}
