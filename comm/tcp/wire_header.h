#pragma once
// The header in front of every message on a tcp-backend connection (after the handshake):
//
//   u32 magic "DDPT" | u8 channel | 3 bytes padding | i64 tag | u64 payload bytes   (24 bytes,
//   host byte order: peers on one job share an architecture)
//
// check_header() is the one judge of a header read off the wire: pure, on 24 bytes (fuzzable).
#include <cstddef>
#include <cstdint>
#include <string>

namespace ddp::comm::tcp {

enum class Channel : uint8_t { kUser = 0, kCollective = 1, kFingerprint = 2, kBye = 3 };

inline constexpr uint32_t kMsgMagic = 0x54504444;  // "DDPT"
// No message is larger (1 TiB): a header announcing more is corrupt.
inline constexpr uint64_t kMaxMessage = uint64_t{1} << 40;
// Messages that arrive before their recv is posted are buffered, at most this many bytes per
// peer at a time (DDP_TCP_MAX_UNEXPECTED_BYTES overrides); beyond it the group fails.
inline constexpr uint64_t kDefaultMaxUnexpectedBytes = uint64_t{1} << 30;

struct WireHeader {
  uint32_t magic = kMsgMagic;
  uint8_t channel = 0;
  uint8_t pad[3] = {};
  int64_t tag = 0;
  uint64_t bytes = 0;
};
static_assert(sizeof(WireHeader) == 24);

// Empty when the header is well-formed, else what is wrong with it.
std::string check_header(const WireHeader& h);
std::string check_header(const uint8_t* bytes, size_t size);  // size must be 24

// Empty when a message of `bytes` may be buffered on top of `buffered` under `cap`, else why not.
std::string check_unexpected(uint64_t bytes, uint64_t buffered, uint64_t cap);

}  // namespace ddp::comm::tcp
