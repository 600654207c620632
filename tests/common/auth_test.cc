// auth: the primitives match the published test vectors, and proofs bind token, role and nonces.
#include "common/auth.h"

#include <doctest/doctest.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>

#include <random>
#include <string>

using namespace ddp;

TEST_CASE("SHA-256 and HMAC-SHA256 match the published vectors") {
  CHECK(auth::hex(auth::sha256("abc")) == "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  // RFC 4231, test case 2.
  CHECK(auth::hex(auth::hmac_sha256("Jefe", "what do ya want for nothing?")) ==
        "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843");
  CHECK(auth::hex(auth::sha256("abc"), 4) == "ba7816bf");
  // FIPS 180-4's examples: empty, two blocks, and a million 'a's.
  CHECK(auth::hex(auth::sha256("")) == "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  CHECK(auth::hex(auth::sha256("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq")) ==
        "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
  CHECK(auth::hex(auth::sha256(std::string(1'000'000, 'a'))) ==
        "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");
  // RFC 4231, test case 6: a key longer than a block is hashed first.
  CHECK(auth::hex(auth::hmac_sha256(std::string(131, '\xaa'),
                                    "Test Using Larger Than Block-Size Key - Hash Key First")) ==
        "60e431591ee0b67f0d8a26aacbf5b77f8e0bc6213728c5140546040f0ee37f54");
}

// Every length across the block and padding boundaries, and keys of every size class, against
// libcrypto (the implementation auth.cc replaced).
TEST_CASE("SHA-256 and HMAC-SHA256 agree with libcrypto on every length up to 300 bytes") {
  std::mt19937 rng(7);
  for (size_t n = 0; n <= 300; ++n) {
    std::string data(n, '\0'), key(n % 150, '\0');
    for (auto& c : data) c = static_cast<char>(rng());
    for (auto& c : key) c = static_cast<char>(rng());
    unsigned char want[32];
    unsigned int len = 0;
    REQUIRE(EVP_Digest(data.data(), data.size(), want, &len, EVP_sha256(), nullptr) == 1);
    CHECK(auth::equal(auth::sha256(data).data(), want, 32));
    const unsigned char empty = 0;
    REQUIRE(HMAC(EVP_sha256(), key.empty() ? &empty : reinterpret_cast<const unsigned char*>(key.data()),
                 static_cast<int>(key.size()), reinterpret_cast<const unsigned char*>(data.data()),
                 data.size(), want, &len) != nullptr);
    CHECK_MESSAGE(auth::equal(auth::hmac_sha256(key, data).data(), want, 32), "length ", n, ", key ",
                  key.size());
  }
}

TEST_CASE("equal compares every byte") {
  const uint8_t a[4] = {1, 2, 3, 4}, b[4] = {1, 2, 3, 5}, c[4] = {0, 2, 3, 4};
  CHECK(auth::equal(a, a, 4));
  CHECK_FALSE(auth::equal(a, b, 4));
  CHECK_FALSE(auth::equal(a, c, 4));
  CHECK(auth::equal(a, b, 3));
}

TEST_CASE("nonces are fresh; proofs depend on the token, the label and both nonces") {
  auth::Nonce a = auth::random_nonce(), b = auth::random_nonce();
  CHECK(a != b);
  auto p = auth::prove("tok", "x server", a, b);
  CHECK(auth::equal(p, auth::prove("tok", "x server", a, b)));
  CHECK_FALSE(auth::equal(p, auth::prove("tok2", "x server", a, b)));
  CHECK_FALSE(auth::equal(p, auth::prove("tok", "x client", a, b)));
  CHECK_FALSE(auth::equal(p, auth::prove("tok", "x server", b, a)));
  CHECK_FALSE(auth::equal(p, auth::prove("", "x server", a, b)));
}
