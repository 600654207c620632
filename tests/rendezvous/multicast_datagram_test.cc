#include "rendezvous/multicast_datagram.h"

#include <doctest/doctest.h>

#include "common/error.h"

using namespace ddp;
using namespace ddp::rdzv::mcast;

namespace {

const std::string kToken = "0123456789abcdef0123456789abcdef";

Announcement sample() {
  Announcement a;
  a.job_id = "job-42";
  a.host = "node-a";
  for (size_t i = 0; i < a.instance.size(); ++i) a.instance[i] = static_cast<uint8_t>(i * 7);
  a.seq = 0x0102030405060708ull;
  a.time_ms = 1'790'000'000'000ull;
  a.world = 3;
  a.requested_rank = 2;
  a.store_port = 40123;
  a.addresses = {"10.77.0.1", "fd00::7", "127.0.0.1"};
  return a;
}

DecodeStatus status_of(const std::vector<uint8_t>& bytes, const std::string& token = kToken) {
  return decode(bytes, token).status;
}

}  // namespace

TEST_CASE("round trip: every field, IPv4 and IPv6 addresses") {
  const Announcement a = sample();
  auto bytes = encode(a, kToken);
  CHECK(bytes.size() <= kMaxDatagramSize);
  Decoded d = decode(bytes, kToken);
  REQUIRE(d.status == DecodeStatus::kOk);
  const Announcement& b = d.announcement;
  CHECK(b.job_id == a.job_id);
  CHECK(b.host == a.host);
  CHECK(b.instance == a.instance);
  CHECK(b.seq == a.seq);
  CHECK(b.time_ms == a.time_ms);
  CHECK(b.world == 3);
  CHECK(b.requested_rank == 2);
  CHECK(b.store_port == 40123);
  CHECK(b.addresses == a.addresses);

  Announcement empty = sample();
  empty.addresses.clear();
  empty.host.clear();
  empty.requested_rank = -1;
  Decoded e = decode(encode(empty, kToken), kToken);
  REQUIRE(e.status == DecodeStatus::kOk);
  CHECK(e.announcement.requested_rank == -1);
  CHECK(e.announcement.addresses.empty());
}

TEST_CASE("the token is not in the datagram; another token fails the MAC") {
  auto bytes = encode(sample(), kToken);
  std::string text(bytes.begin(), bytes.end());
  CHECK(text.find(kToken) == std::string::npos);
  CHECK(status_of(bytes, "another token") == DecodeStatus::kBadMac);
  CHECK(status_of(bytes, "") == DecodeStatus::kBadMac);
}

TEST_CASE("every truncation is refused") {
  auto bytes = encode(sample(), kToken);
  for (size_t n = 0; n < bytes.size(); ++n) {
    std::vector<uint8_t> cut(bytes.begin(), bytes.begin() + static_cast<long>(n));
    CAPTURE(n);
    CHECK(status_of(cut) != DecodeStatus::kOk);
  }
  CHECK(status_of({}) == DecodeStatus::kTruncated);
  CHECK(status_of({'D', 'D'}) == DecodeStatus::kTruncated);
}

TEST_CASE("every flipped bit is refused: the MAC covers job id, instance, seq and time") {
  auto bytes = encode(sample(), kToken);
  for (size_t i = 0; i < bytes.size(); ++i) {
    for (uint8_t bit : {0x01, 0x80}) {
      auto bad = bytes;
      bad[i] ^= bit;
      CAPTURE(i);
      CHECK(status_of(bad) != DecodeStatus::kOk);
    }
  }
}

TEST_CASE("oversized, trailing bytes, wrong magic, wrong version") {
  auto bytes = encode(sample(), kToken);
  std::vector<uint8_t> big(kMaxDatagramSize + 1, 0);
  std::copy(bytes.begin(), bytes.end(), big.begin());
  CHECK(status_of(big) == DecodeStatus::kOversized);
  auto trailing = bytes;
  trailing.push_back(0);
  CHECK(status_of(trailing) != DecodeStatus::kOk);
  auto magic = bytes;
  magic[0] = 'X';
  CHECK(status_of(magic) == DecodeStatus::kBadMagic);
  auto version = bytes;
  version[4] = 2;
  CHECK(status_of(version) == DecodeStatus::kBadVersion);
  std::vector<uint8_t> junk(300, 0xff);
  CHECK(status_of(junk) == DecodeStatus::kBadMagic);
}

TEST_CASE("well-authenticated nonsense is malformed, not trusted") {
  Announcement a = sample();
  a.requested_rank = -5;
  CHECK(status_of(encode(a, kToken)) == DecodeStatus::kMalformed);
  a = sample();
  a.world = 0;
  CHECK(status_of(encode(a, kToken)) == DecodeStatus::kMalformed);
  // An address count over the cap, with a valid header (the MAC is checked after the structure).
  auto bytes = encode(sample(), kToken);
  const size_t count_at = 6 + 1 + a.job_id.size() + 1 + a.host.size() + 16 + 8 + 8 + 4 + 4 + 2;
  REQUIRE(bytes[count_at] == 3);
  bytes[count_at] = 200;
  CHECK(status_of(bytes) == DecodeStatus::kMalformed);
  bytes[count_at] = 3;
  bytes[count_at + 1] = 5;  // family 5
  CHECK(status_of(bytes) == DecodeStatus::kMalformed);
}

TEST_CASE("encode refuses what cannot be sent") {
  Announcement a = sample();
  a.addresses = {"not-an-ip"};
  CHECK_THROWS_AS(encode(a, kToken), InvalidArgument);
  a = sample();
  a.job_id = std::string(256, 'j');
  CHECK_THROWS_AS(encode(a, kToken), InvalidArgument);
  a = sample();
  a.addresses.assign(kMaxAddresses + 1, "10.0.0.1");
  CHECK_THROWS_AS(encode(a, kToken), InvalidArgument);
  a = sample();
  a.addresses.assign(kMaxAddresses, "ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff");
  a.job_id = std::string(255, 'j');
  a.host = std::string(255, 'h');
  CHECK(encode(a, kToken).size() <= kMaxDatagramSize);  // the largest valid announcement fits
}
