// auth: the primitives match the published test vectors, and proofs bind token, role and nonces.
#include "common/auth.h"

#include <doctest/doctest.h>

using namespace ddp;

TEST_CASE("SHA-256 and HMAC-SHA256 match the published vectors") {
  CHECK(auth::hex(auth::sha256("abc")) == "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  // RFC 4231, test case 2.
  CHECK(auth::hex(auth::hmac_sha256("Jefe", "what do ya want for nothing?")) ==
        "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843");
  CHECK(auth::hex(auth::sha256("abc"), 4) == "ba7816bf");
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
