#include "rendezvous/tcp_store_protocol.h"

#include <cstring>

namespace ddp::rdzv::proto {

Writer::Writer(MsgType type) {
  buf_.reserve(64);
  buf_.resize(kFrameHeaderSize);
  u8(static_cast<uint8_t>(type));
}

void Writer::raw(const void* data, size_t size) {
  const auto* p = static_cast<const uint8_t*>(data);
  buf_.insert(buf_.end(), p, p + size);
}

Writer& Writer::u8(uint8_t v) {
  buf_.push_back(v);
  return *this;
}

Writer& Writer::u16(uint16_t v) {
  uint8_t b[2] = {static_cast<uint8_t>(v), static_cast<uint8_t>(v >> 8)};
  raw(b, 2);
  return *this;
}

Writer& Writer::u32(uint32_t v) {
  uint8_t b[4];
  for (int i = 0; i < 4; ++i) b[i] = static_cast<uint8_t>(v >> (8 * i));
  raw(b, 4);
  return *this;
}

Writer& Writer::i64(int64_t v) {
  auto u = static_cast<uint64_t>(v);
  uint8_t b[8];
  for (int i = 0; i < 8; ++i) b[i] = static_cast<uint8_t>(u >> (8 * i));
  raw(b, 8);
  return *this;
}

Writer& Writer::bytes(const void* data, size_t size) {
  if (size > kMaxFrameSize)
    DDP_THROW(rdzv::proto::ProtocolError, "field of ", size, " bytes exceeds the frame limit");
  u32(static_cast<uint32_t>(size));
  raw(data, size);
  return *this;
}

Writer& Writer::strs(const std::vector<std::string>& v) {
  if (v.size() > kMaxWaitKeys) {
    DDP_THROW(InvalidArgument, "store request names ", v.size(), " keys; the limit is ", kMaxWaitKeys);
  }
  u32(static_cast<uint32_t>(v.size()));
  for (const auto& s : v) str(s);
  return *this;
}

const std::vector<uint8_t>& Writer::finish() {
  size_t payload = buf_.size() - kFrameHeaderSize;
  if (payload > kMaxFrameSize) {
    DDP_THROW(InvalidArgument, "store request of ", payload, " bytes exceeds the frame limit of ",
              kMaxFrameSize);
  }
  for (size_t i = 0; i < 4; ++i) buf_[i] = static_cast<uint8_t>(payload >> (8 * i));
  return buf_;
}

uint32_t decode_length(const uint8_t* p) {
  return static_cast<uint32_t>(p[0]) | (static_cast<uint32_t>(p[1]) << 8) |
         (static_cast<uint32_t>(p[2]) << 16) | (static_cast<uint32_t>(p[3]) << 24);
}

void Reader::need(size_t n) const {
  if (left() < n) {
    DDP_THROW(rdzv::proto::ProtocolError, "truncated frame: needed ", n, " more bytes, ", left(), " left");
  }
}

uint8_t Reader::u8() {
  need(1);
  return *p_++;
}

uint16_t Reader::u16() {
  need(2);
  uint16_t v = static_cast<uint16_t>(p_[0] | (p_[1] << 8));
  p_ += 2;
  return v;
}

uint32_t Reader::u32() {
  need(4);
  uint32_t v = decode_length(p_);
  p_ += 4;
  return v;
}

int64_t Reader::i64() {
  need(8);
  uint64_t v = 0;
  for (int i = 7; i >= 0; --i) v = (v << 8) | p_[i];
  p_ += 8;
  return static_cast<int64_t>(v);
}

Bytes Reader::bytes(size_t limit) {
  uint32_t n = u32();
  if (n > limit) DDP_THROW(rdzv::proto::ProtocolError, "field of ", n, " bytes exceeds its limit of ", limit);
  need(n);
  Bytes out(p_, p_ + n);
  p_ += n;
  return out;
}

std::string Reader::str(size_t limit) {
  uint32_t n = u32();
  if (n > limit) DDP_THROW(rdzv::proto::ProtocolError, "field of ", n, " bytes exceeds its limit of ", limit);
  need(n);
  std::string out(reinterpret_cast<const char*>(p_), n);
  p_ += n;
  return out;
}

std::vector<std::string> Reader::keys() {
  uint32_t n = u32();
  if (n > kMaxWaitKeys)
    DDP_THROW(rdzv::proto::ProtocolError, n, " keys in one request exceed the limit of ", kMaxWaitKeys);
  std::vector<std::string> out;
  out.reserve(std::min<size_t>(n, left() / 4));
  for (uint32_t i = 0; i < n; ++i) {
    out.push_back(key());
    if (out.back().empty()) DDP_THROW(rdzv::proto::ProtocolError, "empty key");
  }
  return out;
}

void Reader::done() const {
  if (left() != 0) DDP_THROW(rdzv::proto::ProtocolError, left(), " unexpected trailing bytes in frame");
}

const char* type_name(MsgType t) {
  switch (t) {
    case MsgType::kHello: return "hello";
    case MsgType::kSet: return "set";
    case MsgType::kGet: return "get";
    case MsgType::kAdd: return "add";
    case MsgType::kCompareSet: return "compare_set";
    case MsgType::kCheck: return "check";
    case MsgType::kWait: return "wait";
    case MsgType::kDelete: return "delete_key";
    case MsgType::kNumKeys: return "num_keys";
    case MsgType::kCancel: return "cancel";
    case MsgType::kAuth: return "auth";
    case MsgType::kChallenge: return "challenge";
    case MsgType::kOk: return "ok";
    case MsgType::kTimedOut: return "timed_out";
    case MsgType::kError: return "error";
  }
  return "unknown";
}

}  // namespace ddp::rdzv::proto
