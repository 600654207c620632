#include "common/auth.h"

#include <openssl/crypto.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/rand.h>

#include <cerrno>

#include "common/error.h"

namespace ddp::auth {

Digest sha256(std::string_view data) {
  Digest d{};
  unsigned int len = 0;
  if (EVP_Digest(data.data(), data.size(), d.data(), &len, EVP_sha256(), nullptr) != 1 || len != d.size()) {
    DDP_THROW(Error, "SHA-256 failed (libcrypto error ", ERR_get_error(), ")");
  }
  return d;
}

Digest hmac_sha256(std::string_view key, std::string_view data) {
  Digest d{};
  unsigned int len = 0;
  // HMAC() with a null key pointer but length 0 is fine; give it a valid pointer anyway.
  static const unsigned char kEmpty = 0;
  const void* k = key.empty() ? static_cast<const void*>(&kEmpty) : key.data();
  if (HMAC(EVP_sha256(), k, static_cast<int>(key.size()), reinterpret_cast<const unsigned char*>(data.data()),
           data.size(), d.data(), &len) == nullptr ||
      len != d.size()) {
    DDP_THROW(Error, "HMAC-SHA256 failed (libcrypto error ", ERR_get_error(), ")");
  }
  return d;
}

void random_bytes(uint8_t* out, size_t size) {
  if (RAND_bytes(out, static_cast<int>(size)) != 1) {
    throw SystemError(
        detail::str("RAND_bytes: no randomness available (libcrypto error ", ERR_get_error(), ")"), EIO,
        __FILE__, __LINE__);
  }
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

bool equal(const void* a, const void* b, size_t size) { return CRYPTO_memcmp(a, b, size) == 0; }

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
