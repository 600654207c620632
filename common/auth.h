#pragma once
// Job-token authentication shared by the store protocol and the tcp backend's handshake.
//
// Challenge-response, mutual, the token never on the wire: the connecting side sends a fresh
// random nonce, the accepting side answers with its own nonce and a proof, the connector checks
// that proof and answers with its own. A proof is HMAC-SHA256(token, label | client nonce |
// server nonce); the label names the protocol and the role ("... server" / "... client"), so a
// proof made for one role or protocol is never accepted for another and an attacker cannot
// reflect a peer's proof back at it. Fresh nonces on both sides defeat replay.
//
// SHA-256 (FIPS 180-4) and HMAC (RFC 2104) are our own, checked against the published vectors
// and libcrypto (auth_test): loading libcrypto slowed every launcher's and worker's start-up.
// Randomness: getrandom(2). Pure functions, thread-safe; random_nonce() throws SystemError.
#include <array>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace ddp::auth {

inline constexpr size_t kNonceSize = 32;
inline constexpr size_t kDigestSize = 32;
using Nonce = std::array<uint8_t, kNonceSize>;
using Digest = std::array<uint8_t, kDigestSize>;

Digest sha256(std::string_view data);
Digest hmac_sha256(std::string_view key, std::string_view data);
// Random bytes from the kernel's CSPRNG (getrandom(2), blocking until it is seeded).
Nonce random_nonce();
void random_bytes(uint8_t* out, size_t size);
// A seed or an identifier: std::random_device's first use asks the CPU (cpuid), a VM exit each.
uint64_t random_u64();

// HMAC-SHA256(token, label | 0x00 | client_nonce | server_nonce).
Digest prove(std::string_view token, std::string_view label, const Nonce& client_nonce,
             const Nonce& server_nonce);
// Compares in time independent of the content.
bool equal(const void* a, const void* b, size_t size);
inline bool equal(const Digest& a, const Digest& b) { return equal(a.data(), b.data(), a.size()); }

// Lower-case hex of the first `bytes` bytes of a digest (all of it by default).
std::string hex(const Digest& d, size_t bytes = kDigestSize);

}  // namespace ddp::auth
