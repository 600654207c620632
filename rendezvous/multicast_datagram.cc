#include "rendezvous/multicast_datagram.h"

#include <arpa/inet.h>

#include <cstring>

#include "common/auth.h"
#include "common/error.h"
#include "common/host_addresses.h"

namespace ddp::rdzv::mcast {
namespace {

constexpr char kMagic[4] = {'D', 'D', 'P', 'M'};
constexpr uint8_t kVersion = 1;
constexpr uint8_t kKindAnnounce = 1;
constexpr std::string_view kMacLabel = "ddp multicast rendezvous v1";

class Writer {
 public:
  void u8(uint8_t v) { out_.push_back(v); }
  void be(uint64_t v, int bytes) {
    for (int i = bytes - 1; i >= 0; --i) out_.push_back(static_cast<uint8_t>(v >> (8 * i)));
  }
  void raw(const void* p, size_t n) {
    auto* b = static_cast<const uint8_t*>(p);
    out_.insert(out_.end(), b, b + n);
  }
  void name(const std::string& s, const char* what) {
    if (s.size() > kMaxNameSize)
      DDP_THROW(InvalidArgument, "multicast announcement: ", what, " longer than 255 bytes");
    u8(static_cast<uint8_t>(s.size()));
    raw(s.data(), s.size());
  }
  std::vector<uint8_t>& bytes() { return out_; }

 private:
  std::vector<uint8_t> out_;
};

// Bounds-checked reads: the first failure sticks and every later read returns zeros.
class Reader {
 public:
  explicit Reader(std::span<const uint8_t> b) : b_(b) {}
  bool ok() const { return ok_; }
  bool at_end() const { return pos_ == b_.size(); }
  uint64_t be(int bytes) {
    if (!take(bytes)) return 0;
    uint64_t v = 0;
    for (int i = 0; i < bytes; ++i) v = (v << 8) | b_[pos_ - bytes + i];
    return v;
  }
  bool raw(void* out, size_t n) {
    if (!take(n)) return false;
    std::memcpy(out, b_.data() + pos_ - n, n);
    return true;
  }
  std::string name() {
    size_t n = be(1);
    if (!take(n)) return {};
    return std::string(reinterpret_cast<const char*>(b_.data() + pos_ - n), n);
  }

 private:
  bool take(size_t n) {
    if (!ok_ || b_.size() - pos_ < n) return ok_ = false;
    pos_ += n;
    return true;
  }
  std::span<const uint8_t> b_;
  size_t pos_ = 0;
  bool ok_ = true;
};

auth::Digest mac_of(std::string_view token, std::span<const uint8_t> body) {
  std::string data(kMacLabel);
  data += '\0';
  data.append(reinterpret_cast<const char*>(body.data()), body.size());
  return auth::hmac_sha256(token, data);
}

}  // namespace

const char* to_string(DecodeStatus s) {
  switch (s) {
    case DecodeStatus::kOk: return "ok";
    case DecodeStatus::kTruncated: return "truncated";
    case DecodeStatus::kOversized: return "oversized";
    case DecodeStatus::kBadMagic: return "not ours";
    case DecodeStatus::kBadVersion: return "unknown version";
    case DecodeStatus::kMalformed: return "malformed";
    case DecodeStatus::kBadMac: return "wrong MAC";
  }
  return "?";
}

std::string hex(const InstanceId& id) {
  static const char* kHex = "0123456789abcdef";
  std::string out;
  for (uint8_t b : id) {
    out += kHex[b >> 4];
    out += kHex[b & 15];
  }
  return out;
}

std::vector<uint8_t> encode(const Announcement& a, std::string_view token) {
  if (a.addresses.size() > kMaxAddresses)
    DDP_THROW(InvalidArgument, "multicast announcement: more than ", kMaxAddresses, " addresses");
  Writer w;
  w.raw(kMagic, sizeof kMagic);
  w.u8(kVersion);
  w.u8(kKindAnnounce);
  w.name(a.job_id, "job id");
  w.name(a.host, "host name");
  w.raw(a.instance.data(), a.instance.size());
  w.be(a.seq, 8);
  w.be(a.time_ms, 8);
  w.be(a.world, 4);
  w.be(static_cast<uint32_t>(a.requested_rank), 4);
  w.be(a.store_port, 2);
  w.u8(static_cast<uint8_t>(a.addresses.size()));
  for (const auto& ip : a.addresses) {
    uint8_t buf[16];
    if (::inet_pton(AF_INET, ip.c_str(), buf) == 1) {
      w.u8(4);
      w.raw(buf, 4);
    } else if (::inet_pton(AF_INET6, ip.c_str(), buf) == 1) {
      w.u8(6);
      w.raw(buf, 16);
    } else {
      DDP_THROW(InvalidArgument, "multicast announcement: '", ip, "' is not an IP address");
    }
  }
  auth::Digest mac = mac_of(token, w.bytes());
  w.raw(mac.data(), mac.size());
  if (w.bytes().size() > kMaxDatagramSize) {
    DDP_THROW(InvalidArgument, "multicast announcement of ", w.bytes().size(), " bytes exceeds ",
              kMaxDatagramSize);
  }
  return std::move(w.bytes());
}

Decoded decode(std::span<const uint8_t> bytes, std::string_view token) {
  Decoded d;
  if (bytes.size() > kMaxDatagramSize) return {DecodeStatus::kOversized, {}};
  if (bytes.size() < sizeof kMagic + 2) return {DecodeStatus::kTruncated, {}};
  if (std::memcmp(bytes.data(), kMagic, sizeof kMagic) != 0) return {DecodeStatus::kBadMagic, {}};
  if (bytes[4] != kVersion || bytes[5] != kKindAnnounce) return {DecodeStatus::kBadVersion, {}};
  if (bytes.size() < auth::kDigestSize + 6) return {DecodeStatus::kTruncated, {}};
  const auto body = bytes.first(bytes.size() - auth::kDigestSize);
  Reader r(body.subspan(6));
  Announcement& a = d.announcement;
  a.job_id = r.name();
  a.host = r.name();
  r.raw(a.instance.data(), a.instance.size());
  a.seq = r.be(8);
  a.time_ms = r.be(8);
  a.world = static_cast<uint32_t>(r.be(4));
  a.requested_rank = static_cast<int32_t>(static_cast<uint32_t>(r.be(4)));
  a.store_port = static_cast<uint16_t>(r.be(2));
  size_t n = r.be(1);
  if (n > kMaxAddresses) return {DecodeStatus::kMalformed, {}};
  for (size_t i = 0; i < n && r.ok(); ++i) {
    uint8_t family = static_cast<uint8_t>(r.be(1));
    uint8_t buf[16];
    if (family == 4 && r.raw(buf, 4)) {
      a.addresses.push_back(net::ip_text(AF_INET, buf));
    } else if (family == 6 && r.raw(buf, 16)) {
      a.addresses.push_back(net::ip_text(AF_INET6, buf));
    } else {
      if (r.ok()) return {DecodeStatus::kMalformed, {}};
      break;
    }
  }
  // Structure before MAC: a short body is truncation whatever its MAC says.
  if (!r.ok()) return {DecodeStatus::kTruncated, {}};
  if (!r.at_end()) return {DecodeStatus::kMalformed, {}};
  if (a.requested_rank < -1 || a.world == 0) return {DecodeStatus::kMalformed, {}};
  const auth::Digest want = mac_of(token, body);
  if (!auth::equal(want.data(), bytes.data() + body.size(), auth::kDigestSize))
    return {DecodeStatus::kBadMac, {}};
  d.status = DecodeStatus::kOk;
  return d;
}

}  // namespace ddp::rdzv::mcast
