#include "comm/tcp/wire_header.h"

#include <cstring>

#include "common/error.h"

namespace ddp::comm::tcp {

std::string check_header(const WireHeader& h) {
  if (h.magic != kMsgMagic) return detail::str("bad magic 0x", std::hex, h.magic);
  if (h.channel > static_cast<uint8_t>(Channel::kBye)) return detail::str("unknown channel ", int{h.channel});
  if (h.bytes > kMaxMessage) return detail::str("impossible message size ", h.bytes, " bytes");
  if (h.channel == static_cast<uint8_t>(Channel::kBye) && h.bytes != 0) return "a goodbye with a payload";
  return {};
}

std::string check_header(const uint8_t* bytes, size_t size) {
  if (size != sizeof(WireHeader)) return detail::str("header of ", size, " bytes");
  WireHeader h;
  std::memcpy(&h, bytes, sizeof(h));
  return check_header(h);
}

std::string check_unexpected(uint64_t bytes, uint64_t buffered, uint64_t cap) {
  if (bytes <= cap && buffered <= cap - bytes) return {};
  return detail::str("it sent a message of ", bytes, " bytes before its receive was posted, with ", buffered,
                     " bytes already buffered; at most ", cap, " may wait (DDP_TCP_MAX_UNEXPECTED_BYTES)");
}

}  // namespace ddp::comm::tcp
