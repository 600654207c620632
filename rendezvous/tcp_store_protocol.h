#pragma once
// The TCPStore wire protocol: versioned, length-prefixed binary frames over one TCP connection.
//   frame   := u32 payload_length (little-endian) | payload
//   payload := u8 type | fields...      integers little-endian; bytes/strings as u32 length | data
// After the handshake (tcp_store_handshake.h) the client sends one request at a time and reads
// exactly one reply; while a Get/Wait is pending it may send Cancel, which the server answers by
// ending that request with TimedOut (a Cancel that finds nothing pending is ignored).
// Limits: kMaxKeySize, kMaxValueSize, kMaxWaitKeys keys per wait/check, kMaxFrameSize a frame.
// A frame that breaks a rule is a ProtocolError: the server closes that one connection.
#include <cstdint>
#include <string>
#include <vector>

#include "common/error.h"
#include "rendezvous/store.h"

namespace ddp::rdzv::proto {

inline constexpr uint32_t kMagic = 0x53504444;  // "DDPS"
// 2: challenge-response handshake (1 sent the job token in clear).
inline constexpr uint16_t kVersion = 2;
inline constexpr size_t kMaxWaitKeys = 65536;
inline constexpr size_t kMaxFrameSize = 2 * kMaxValueSize + kMaxKeySize + 1024;
inline constexpr size_t kFrameHeaderSize = 4;

enum class MsgType : uint8_t {
  kHello = 1,
  kSet = 2,
  kGet = 3,
  kAdd = 4,
  kCompareSet = 5,
  kCheck = 6,
  kWait = 7,
  kDelete = 8,
  kNumKeys = 9,
  kCancel = 10,
  kAuth = 11,  // handshake: the client's proof
  // Replies.
  kOk = 100,
  kTimedOut = 101,   // u32 n, n missing keys
  kError = 102,      // u8 ErrorCode, string message
  kChallenge = 103,  // handshake: the server's nonce and proof
};

enum class ErrorCode : uint8_t {
  kInvalidArgument = 1,  // e.g. add on a value that is not an integer
  kRefused = 2,          // wrong or missing job token
  kBadVersion = 3,       // protocol version not spoken by the server
  kProtocol = 4,         // malformed request
};

// A frame that breaks the protocol (truncated field, oversize length, unknown type): bad input.
class ProtocolError : public InvalidArgument {
 public:
  ProtocolError(const std::string& what, const char* file, int line) : InvalidArgument(what, file, line) {}
};

// Builds one frame: reserves the length prefix, appends fields, finish() patches the length.
class Writer {
 public:
  explicit Writer(MsgType type);
  Writer& u8(uint8_t v);
  Writer& u16(uint16_t v);
  Writer& u32(uint32_t v);
  Writer& i64(int64_t v);
  Writer& bytes(const void* data, size_t size);
  Writer& bytes(const Bytes& b) { return bytes(b.data(), b.size()); }
  Writer& str(const std::string& s) { return bytes(s.data(), s.size()); }
  Writer& strs(const std::vector<std::string>& v);
  // The finished frame (length prefix included). ProtocolError when over kMaxFrameSize.
  const std::vector<uint8_t>& finish();

 private:
  void raw(const void* data, size_t size);
  std::vector<uint8_t> buf_;
};

// Reads the fields of one payload; every read is bounds-checked (ProtocolError when short).
class Reader {
 public:
  Reader(const uint8_t* data, size_t size) : p_(data), end_(data + size) {}
  MsgType type() { return static_cast<MsgType>(u8()); }
  uint8_t u8();
  uint16_t u16();
  uint32_t u32();
  int64_t i64();
  Bytes bytes(size_t limit);
  std::string str(size_t limit);
  std::string key() { return str(kMaxKeySize); }
  std::vector<std::string> keys();  // u32 count (<= kMaxWaitKeys) then keys
  // ProtocolError when bytes are left over: a frame carries exactly its fields.
  void done() const;
  size_t left() const { return static_cast<size_t>(end_ - p_); }

 private:
  void need(size_t n) const;
  const uint8_t* p_;
  const uint8_t* end_;
};

// Decodes the little-endian u32 length prefix at `p`.
uint32_t decode_length(const uint8_t* p);

const char* type_name(MsgType t);

}  // namespace ddp::rdzv::proto
