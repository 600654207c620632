#include "common/auth.h"

#include <errno.h>
#include <sys/random.h>

#include <algorithm>
#include <cstring>

#include "common/error.h"

namespace ddp::auth {
namespace {

// SHA-256 as FIPS 180-4 defines it, one message at a time.
constexpr uint32_t kRound[64] = {
    0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1, 0x923f82a4, 0xab1c5ed5,
    0xd807aa98, 0x12835b01, 0x243185be, 0x550c7dc3, 0x72be5d74, 0x80deb1fe, 0x9bdc06a7, 0xc19bf174,
    0xe49b69c1, 0xefbe4786, 0x0fc19dc6, 0x240ca1cc, 0x2de92c6f, 0x4a7484aa, 0x5cb0a9dc, 0x76f988da,
    0x983e5152, 0xa831c66d, 0xb00327c8, 0xbf597fc7, 0xc6e00bf3, 0xd5a79147, 0x06ca6351, 0x14292967,
    0x27b70a85, 0x2e1b2138, 0x4d2c6dfc, 0x53380d13, 0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85,
    0xa2bfe8a1, 0xa81a664b, 0xc24b8b70, 0xc76c51a3, 0xd192e819, 0xd6990624, 0xf40e3585, 0x106aa070,
    0x19a4c116, 0x1e376c08, 0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a, 0x5b9cca4f, 0x682e6ff3,
    0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208, 0x90befffa, 0xa4506ceb, 0xbef9a3f7, 0xc67178f2};

constexpr uint32_t rotr(uint32_t x, int n) { return (x >> n) | (x << (32 - n)); }

class Sha256 {
 public:
  void update(const uint8_t* data, size_t size) {
    total_ += size;
    while (size > 0) {
      const size_t n = std::min(size, sizeof block_ - used_);
      std::memcpy(block_ + used_, data, n);
      used_ += n;
      data += n;
      size -= n;
      if (used_ == sizeof block_) {
        compress();
        used_ = 0;
      }
    }
  }
  void update(std::string_view s) { update(reinterpret_cast<const uint8_t*>(s.data()), s.size()); }

  Digest finish() {
    const uint64_t bits = total_ * 8;
    const uint8_t one = 0x80, zero = 0;
    update(&one, 1);
    while (used_ != sizeof block_ - 8) update(&zero, 1);
    uint8_t length[8];
    for (int i = 0; i < 8; ++i) length[i] = static_cast<uint8_t>(bits >> (56 - 8 * i));
    update(length, 8);
    Digest d{};
    for (size_t i = 0; i < 8; ++i) {
      for (size_t j = 0; j < 4; ++j) d[4 * i + j] = static_cast<uint8_t>(h_[i] >> (24 - 8 * j));
    }
    return d;
  }

 private:
  void compress() {
    uint32_t w[64];
    for (size_t i = 0; i < 16; ++i) {
      w[i] = uint32_t{block_[4 * i]} << 24 | uint32_t{block_[4 * i + 1]} << 16 |
             uint32_t{block_[4 * i + 2]} << 8 | uint32_t{block_[4 * i + 3]};
    }
    for (size_t i = 16; i < 64; ++i) {
      const uint32_t s0 = rotr(w[i - 15], 7) ^ rotr(w[i - 15], 18) ^ (w[i - 15] >> 3);
      const uint32_t s1 = rotr(w[i - 2], 17) ^ rotr(w[i - 2], 19) ^ (w[i - 2] >> 10);
      w[i] = w[i - 16] + s0 + w[i - 7] + s1;
    }
    uint32_t a = h_[0], b = h_[1], c = h_[2], d = h_[3], e = h_[4], f = h_[5], g = h_[6], h = h_[7];
    for (size_t i = 0; i < 64; ++i) {
      const uint32_t t1 =
          h + (rotr(e, 6) ^ rotr(e, 11) ^ rotr(e, 25)) + ((e & f) ^ (~e & g)) + kRound[i] + w[i];
      const uint32_t t2 = (rotr(a, 2) ^ rotr(a, 13) ^ rotr(a, 22)) + ((a & b) ^ (a & c) ^ (b & c));
      h = g;
      g = f;
      f = e;
      e = d + t1;
      d = c;
      c = b;
      b = a;
      a = t1 + t2;
    }
    const uint32_t out[8] = {a, b, c, d, e, f, g, h};
    for (size_t i = 0; i < 8; ++i) h_[i] += out[i];
  }

  uint32_t h_[8] = {0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a,
                    0x510e527f, 0x9b05688c, 0x1f83d9ab, 0x5be0cd19};
  uint8_t block_[64] = {};
  size_t used_ = 0;
  uint64_t total_ = 0;
};

}  // namespace

Digest sha256(std::string_view data) {
  Sha256 s;
  s.update(data);
  return s.finish();
}

// RFC 2104: H((K ^ opad) | H((K ^ ipad) | data)), a key longer than a block hashed first.
Digest hmac_sha256(std::string_view key, std::string_view data) {
  uint8_t k[64] = {};
  if (key.size() > sizeof k) {
    const Digest kd = sha256(key);
    std::memcpy(k, kd.data(), kd.size());
  } else if (!key.empty()) {
    std::memcpy(k, key.data(), key.size());
  }
  uint8_t pad[64];
  for (size_t i = 0; i < sizeof pad; ++i) pad[i] = k[i] ^ 0x36;
  Sha256 inner;
  inner.update(pad, sizeof pad);
  inner.update(data);
  const Digest inner_digest = inner.finish();
  for (size_t i = 0; i < sizeof pad; ++i) pad[i] = k[i] ^ 0x5c;
  Sha256 outer;
  outer.update(pad, sizeof pad);
  outer.update(inner_digest.data(), inner_digest.size());
  return outer.finish();
}

void random_bytes(uint8_t* out, size_t size) {
  while (size > 0) {
    const ssize_t n = ::getrandom(out, size, 0);
    if (n < 0) {
      if (errno == EINTR) continue;
      DDP_THROW_ERRNO("getrandom: no randomness available");
    }
    out += n;
    size -= static_cast<size_t>(n);
  }
}

uint64_t random_u64() {
  uint64_t v = 0;
  random_bytes(reinterpret_cast<uint8_t*>(&v), sizeof v);
  return v;
}

Nonce random_nonce() {
  Nonce n{};
  random_bytes(n.data(), n.size());
  return n;
}

Digest prove(std::string_view token, std::string_view label, const Nonce& client_nonce,
             const Nonce& server_nonce) {
  std::string msg;
  msg.reserve(label.size() + 1 + 2 * kNonceSize);
  msg.append(label);
  msg.push_back('\0');
  msg.append(reinterpret_cast<const char*>(client_nonce.data()), client_nonce.size());
  msg.append(reinterpret_cast<const char*>(server_nonce.data()), server_nonce.size());
  return hmac_sha256(token, msg);
}

bool equal(const void* a, const void* b, size_t size) {
  // Every byte read whatever the first difference; volatile keeps the compiler from stopping early.
  const volatile uint8_t* x = static_cast<const volatile uint8_t*>(a);
  const volatile uint8_t* y = static_cast<const volatile uint8_t*>(b);
  uint8_t diff = 0;
  for (size_t i = 0; i < size; ++i) diff = static_cast<uint8_t>(diff | (x[i] ^ y[i]));
  return diff == 0;
}

std::string hex(const Digest& d, size_t bytes) {
  static const char* kHex = "0123456789abcdef";
  std::string out;
  for (size_t i = 0; i < bytes && i < d.size(); ++i) {
    out += kHex[d[i] >> 4];
    out += kHex[d[i] & 15];
  }
  return out;
}

}  // namespace ddp::auth
