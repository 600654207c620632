#include "rendezvous/tcp_store_protocol.h"

#include <doctest/doctest.h>

using namespace ddp;
using namespace ddp::rdzv;
using namespace ddp::rdzv::proto;

namespace {
Reader payload_of(const std::vector<uint8_t>& frame) {
  REQUIRE(frame.size() >= kFrameHeaderSize);
  REQUIRE(decode_length(frame.data()) == frame.size() - kFrameHeaderSize);
  return Reader(frame.data() + kFrameHeaderSize, frame.size() - kFrameHeaderSize);
}
}  // namespace

TEST_CASE("fields round-trip through Writer and Reader") {
  Writer w(MsgType::kCompareSet);
  w.u8(7).u16(0xBEEF).u32(0xDEADBEEF).i64(-5).str("key").bytes(Bytes{0, 1, 2}).strs({"a", "bc"});
  auto frame = w.finish();
  Reader r = payload_of(frame);
  CHECK(r.type() == MsgType::kCompareSet);
  CHECK(r.u8() == 7);
  CHECK(r.u16() == 0xBEEF);
  CHECK(r.u32() == 0xDEADBEEF);
  CHECK(r.i64() == -5);
  CHECK(r.key() == "key");
  CHECK(r.bytes(10) == Bytes{0, 1, 2});
  CHECK(r.keys() == std::vector<std::string>{"a", "bc"});
  r.done();
}

TEST_CASE("the length prefix is little-endian") {
  Writer w(MsgType::kNumKeys);
  auto frame = w.finish();
  CHECK(frame == std::vector<uint8_t>{1, 0, 0, 0, static_cast<uint8_t>(MsgType::kNumKeys)});
}

TEST_CASE("short, oversize and trailing fields are ProtocolErrors") {
  Writer w(MsgType::kSet);
  w.u32(100).u8('x');  // claims 100 bytes, has 1
  auto frame = w.finish();
  Reader r = payload_of(frame);
  r.type();
  CHECK_THROWS_AS(r.key(), ProtocolError);

  Writer big(MsgType::kSet);
  big.str(std::string(kMaxKeySize + 1, 'k'));
  auto f2 = big.finish();
  Reader r2 = payload_of(f2);
  r2.type();
  CHECK_THROWS_AS(r2.key(), ProtocolError);

  Writer many(MsgType::kWait);
  many.u32(static_cast<uint32_t>(kMaxWaitKeys + 1));
  auto f3 = many.finish();
  Reader r3 = payload_of(f3);
  r3.type();
  CHECK_THROWS_AS(r3.keys(), ProtocolError);

  Writer extra(MsgType::kNumKeys);
  extra.u8(1);
  auto f4 = extra.finish();
  Reader r4 = payload_of(f4);
  r4.type();
  CHECK_THROWS_AS(r4.done(), ProtocolError);

  Reader empty(nullptr, 0);
  CHECK_THROWS_AS(empty.u32(), ProtocolError);
  // A ProtocolError is bad input.
  CHECK_THROWS_AS(empty.u8(), InvalidArgument);
}

TEST_CASE("a request over the key-count limit is refused before it is sent") {
  Writer w(MsgType::kWait);
  CHECK_THROWS_AS(w.strs(std::vector<std::string>(kMaxWaitKeys + 1, "k")), InvalidArgument);
}

TEST_CASE("type names") {
  CHECK(std::string(type_name(MsgType::kGet)) == "get");
  CHECK(std::string(type_name(static_cast<MsgType>(250))) == "unknown");
}
