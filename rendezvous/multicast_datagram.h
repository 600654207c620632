#pragma once
// The multicast rendezvous datagram: one participant's announcement, authenticated with the job
// token. A pure codec over bytes: no sockets, clocks or state. Thread-safe. Big-endian, at most
// kMaxDatagramSize bytes: "DDPM", version 1, kind 1 (announce), job id and host (u8 length +
// bytes), instance (16 random bytes per participant and run), seq u64, time_ms u64, world u32,
// requested rank i32 (-1: assign), store port u16, addresses (u8 count; each family u8 + 4|16
// bytes), then HMAC-SHA256(token, "ddp multicast rendezvous v1" 0x00 | every byte before it).
// Everything is inside the MAC: a stranger without the token can neither forge nor alter one;
// freshness (time window, seq per instance) is the receiver's (multicast_discovery.h).
// decode() never throws and never reads past the buffer: anything malformed, truncated,
// oversized, with trailing bytes or a wrong MAC is a DecodeStatus other than kOk.
#include <array>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace ddp::rdzv::mcast {

inline constexpr size_t kMaxDatagramSize = 1200;  // below any sane path MTU: never fragmented
inline constexpr size_t kMaxAddresses = 16;
inline constexpr size_t kMaxNameSize = 255;
using InstanceId = std::array<uint8_t, 16>;

struct Announcement {
  std::string job_id;
  std::string host;
  InstanceId instance{};
  uint64_t seq = 0;
  uint64_t time_ms = 0;
  uint32_t world = 0;
  int32_t requested_rank = -1;
  uint16_t store_port = 0;
  std::vector<std::string> addresses;  // IPv4/IPv6 literals
};

enum class DecodeStatus { kOk, kTruncated, kOversized, kBadMagic, kBadVersion, kMalformed, kBadMac };
const char* to_string(DecodeStatus status);

struct Decoded {
  DecodeStatus status = DecodeStatus::kMalformed;
  Announcement announcement;  // valid only when status == kOk
};

// InvalidArgument when the announcement cannot be encoded (names too long, too many or invalid
// addresses, over kMaxDatagramSize).
std::vector<uint8_t> encode(const Announcement& announcement, std::string_view token);
Decoded decode(std::span<const uint8_t> bytes, std::string_view token);

std::string hex(const InstanceId& id);

}  // namespace ddp::rdzv::mcast
