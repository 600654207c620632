// Init-method URLs (env://, file://, tcp://): every error an InvalidArgument.
#include <cstddef>
#include <cstdint>
#include <string>

#include "common/error.h"
#include "rendezvous/init_method.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string url(reinterpret_cast<const char*>(data), size);
  try {
    ddp::rdzv::InitMethod m = ddp::rdzv::parse_init_method(url);
    if (m.rank && m.world_size && *m.rank >= *m.world_size) __builtin_trap();  // promised checked
  } catch (const ddp::InvalidArgument&) {
  }
  ddp::rdzv::is_multicast_address(url);
  return 0;
}
