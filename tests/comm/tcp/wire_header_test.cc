// The wire header judge: well-formed headers pass, every corruption is named.
#include "comm/tcp/wire_header.h"

#include <doctest/doctest.h>

#include <cstring>

using namespace ddp::comm::tcp;

TEST_CASE("check_header names what is wrong") {
  WireHeader h;
  h.bytes = 100;
  CHECK(check_header(h).empty());
  uint8_t raw[sizeof(WireHeader)];
  std::memcpy(raw, &h, sizeof(h));
  CHECK(check_header(raw, sizeof(raw)).empty());
  CHECK(check_header(raw, 23).find("23 bytes") != std::string::npos);
  WireHeader bad = h;
  bad.magic = 1;
  CHECK(check_header(bad).find("magic") != std::string::npos);
  bad = h;
  bad.channel = 4;
  CHECK(check_header(bad).find("channel") != std::string::npos);
  bad = h;
  bad.bytes = kMaxMessage + 1;
  CHECK(check_header(bad).find("impossible") != std::string::npos);
  bad = h;
  bad.channel = static_cast<uint8_t>(Channel::kBye);
  CHECK(check_header(bad).find("goodbye") != std::string::npos);
}

TEST_CASE("check_unexpected: the cap holds for one message and for the sum, without overflow") {
  CHECK(check_unexpected(10, 0, 10).empty());
  CHECK(check_unexpected(5, 5, 10).empty());
  CHECK_FALSE(check_unexpected(11, 0, 10).empty());
  CHECK_FALSE(check_unexpected(6, 5, 10).empty());
  CHECK_FALSE(check_unexpected(UINT64_MAX, 1, 10).empty());
  CHECK(check_unexpected(6, 5, 10).find("DDP_TCP_MAX_UNEXPECTED_BYTES") != std::string::npos);
}
