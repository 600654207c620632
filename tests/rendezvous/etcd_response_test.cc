// The gateway answers' parsing: real answers (taken from etcd 3.4's gateway) become structs;
// anything else (not JSON, truncated, mistyped, bad base64, HTML, binary) is a StoreError
// naming the source, never a crash or another exception.
#include "rendezvous/etcd_response.h"

#include <doctest/doctest.h>

#include <functional>
#include <string>

#include "common/error.h"

using namespace ddp;
using namespace ddp::rdzv;
using namespace ddp::rdzv::etcd;

namespace {

const std::string kSource = "etcd range of key 'k' at http://127.0.0.1:2379";

bool contains(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

std::string store_error(const std::function<void()>& f) {
  try {
    f();
  } catch (const StoreError& e) {
    return e.message();
  }
  return "(no StoreError)";
}

const std::string kRange =
    R"({"header":{"cluster_id":"3249525","member_id":"33198","revision":"2","raft_term":"2"},)"
    R"("kvs":[{"key":"Zm9v","create_revision":"2","mod_revision":"3","version":"1","value":"YmFy","lease":"7"}],"count":"1"})";

}  // namespace

TEST_CASE("base64: round trips every length and byte, and matches the standard alphabet") {
  CHECK(base64_encode(std::string_view("")) == "");
  CHECK(base64_encode(std::string_view("f")) == "Zg==");
  CHECK(base64_encode(std::string_view("fo")) == "Zm8=");
  CHECK(base64_encode(std::string_view("foo")) == "Zm9v");
  CHECK(base64_encode(std::string_view("\xff\xfe\x00", 3)) == "//4A");
  std::string all;
  for (int i = 0; i < 256; ++i) all += static_cast<char>(i);
  for (size_t n = 0; n <= all.size(); n += 7) {
    const std::string part = all.substr(0, n);
    CHECK(base64_decode(base64_encode(std::string_view(part)), "t") == part);
  }
  CHECK(base64_encode(Bytes{0, 1, 2}) == "AAEC");
}

TEST_CASE("base64: malformed text is a StoreError naming what it was") {
  for (const char* bad : {"Zg=", "Z", "Zm9v!", "Zg=a", "====", "Z===", "Zh==", "Zm9=", "Zm 9v", "Zm9v\n"}) {
    INFO(bad);
    const std::string msg = store_error([&] { base64_decode(bad, "the key"); });
    CHECK(contains(msg, "the key"));
  }
}

TEST_CASE("range: keys, values, revisions and count; absent fields are zero") {
  const RangeResponse r = parse_range(kRange, kSource);
  CHECK(r.header.revision == 2);
  REQUIRE(r.kvs.size() == 1);
  CHECK(r.kvs[0].key == "foo");
  CHECK(Store::to_string(r.kvs[0].value) == "bar");
  CHECK(r.kvs[0].create_revision == 2);
  CHECK(r.kvs[0].mod_revision == 3);
  CHECK(r.kvs[0].version == 1);
  CHECK(r.kvs[0].lease == 7);
  CHECK(r.count == 1);
  const RangeResponse none = parse_range(R"({"header":{"revision":"9"}})", kSource);
  CHECK(none.kvs.empty());
  CHECK(none.count == 0);
  CHECK(none.header.revision == 9);
  // Numbers as JSON numbers are taken too; an empty value is an empty value.
  const RangeResponse n =
      parse_range(R"({"header":{"revision":4},"kvs":[{"key":"eA=="}],"count":1})", kSource);
  REQUIRE(n.kvs.size() == 1);
  CHECK(n.kvs[0].value.empty());
  CHECK(n.count == 1);
}

TEST_CASE("txn: the branch taken and each response in order") {
  const TxnResponse ok = parse_txn(
      R"({"header":{"revision":"3"},"succeeded":true,"responses":[{"response_put":{"header":{"revision":"3"}}}]})",
      kSource);
  CHECK(ok.succeeded);
  REQUIRE(ok.responses.size() == 1);
  CHECK(ok.responses[0].kind == ResponseOp::Kind::kPut);
  const TxnResponse failed =
      parse_txn(R"({"header":{"revision":"3"},"responses":[{"response_range":{"header":{"revision":"3"},)"
                R"("kvs":[{"key":"Zm9v","mod_revision":"3","value":"YmF6"}],"count":"1"}},)"
                R"({"response_delete_range":{"deleted":"2"}}]})",
                kSource);
  CHECK_FALSE(failed.succeeded);
  REQUIRE(failed.responses.size() == 2);
  CHECK(failed.responses[0].kind == ResponseOp::Kind::kRange);
  CHECK(Store::to_string(failed.responses[0].range.kvs.at(0).value) == "baz");
  CHECK(failed.responses[1].kind == ResponseOp::Kind::kDeleteRange);
  CHECK(failed.responses[1].delete_range.deleted == 2);
  CHECK(contains(
      store_error([] { parse_txn(R"({"header":{},"responses":[{"response_nothing":{}}]})", kSource); }),
      "no known kind"));
}

TEST_CASE("put, deleterange, leases, authenticate") {
  const PutResponse p = parse_put(
      R"({"header":{"revision":"5"},"prev_kv":{"key":"bmV3","create_revision":"4","mod_revision":"4","version":"1","value":"YmF6"}})",
      kSource);
  REQUIRE(p.prev_kv);
  CHECK(p.prev_kv->key == "new");
  CHECK(parse_delete_range(R"({"header":{"revision":"6"},"deleted":"1"})", kSource).deleted == 1);
  CHECK(parse_delete_range(R"({"header":{"revision":"6"}})", kSource).deleted == 0);
  const LeaseGrantResponse g =
      parse_lease_grant(R"({"header":{"revision":"6"},"ID":"2324035754335413776","TTL":"5"})", kSource);
  CHECK(g.id == 2324035754335413776);
  CHECK(g.ttl == 5);
  CHECK(contains(store_error([] { parse_lease_grant(R"({"header":{},"TTL":"5"})", kSource); }), "ID"));
  CHECK(parse_lease_keepalive(R"({"result":{"header":{"revision":"6"},"ID":"12","TTL":"3"}})", kSource).ttl ==
        3);
  CHECK(parse_lease_keepalive(R"({"result":{"header":{"revision":"6"},"ID":"12"}})", kSource).ttl ==
        0);  // gone
  const LeaseTimeToLiveResponse t = parse_lease_time_to_live(
      R"({"header":{"revision":"1"},"ID":"7587899294531655175","TTL":"1","grantedTTL":"3"})", kSource);
  CHECK(t.ttl == 1);
  CHECK(t.granted_ttl == 3);
  CHECK(parse_lease_time_to_live(R"({"header":{"revision":"1"},"ID":"12345","TTL":"-1"})", kSource).ttl ==
        -1);
  CHECK(
      contains(store_error([] { parse_lease_time_to_live(R"({"header":{},"TTL":"x"})", kSource); }), "TTL"));
  CHECK(parse_authenticate(R"({"header":{"revision":"9"},"token":"zKsuqRrJ.31"})", kSource).token ==
        "zKsuqRrJ.31");
  CHECK(parse_header_only(R"({"header":{"revision":"6"}})", kSource).revision == 6);
}

TEST_CASE("watch chunks: created, events, compaction, cancellation, stream errors") {
  const WatchResponse created =
      parse_watch_chunk(R"({"result":{"header":{"revision":"6"},"created":true}})", kSource);
  CHECK(created.created);
  CHECK(created.header.revision == 6);
  const WatchResponse events = parse_watch_chunk(
      R"({"result":{"header":{"revision":"8"},"events":[{"kv":{"key":"d2Ex","mod_revision":"7","value":"MQ=="}},)"
      R"({"type":"DELETE","kv":{"key":"d2Ex","mod_revision":"8"}}]}})",
      kSource);
  REQUIRE(events.events.size() == 2);
  CHECK(events.events[0].type == Event::Type::kPut);
  CHECK(events.events[0].kv.key == "wa1");
  CHECK(Store::to_string(events.events[0].kv.value) == "1");
  CHECK(events.events[1].type == Event::Type::kDelete);
  CHECK(events.events[1].kv.mod_revision == 8);
  const WatchResponse compacted =
      parse_watch_chunk(R"({"result":{"header":{},"canceled":true,"compact_revision":"8"}})", kSource);
  CHECK(compacted.canceled);
  CHECK(compacted.compact_revision == 8);
  const WatchResponse refused = parse_watch_chunk(
      R"({"result":{"header":{"revision":"9"},"watch_id":"-1","created":true,"canceled":true,)"
      R"("cancel_reason":"rpc error: code = Unauthenticated desc = etcdserver: invalid auth token"}})",
      kSource);
  CHECK(refused.canceled);
  CHECK(contains(refused.cancel_reason, "invalid auth token"));
  const WatchResponse error = parse_watch_chunk(
      R"({"error":{"grpc_code":14,"http_code":503,"message":"etcdserver: no leader","http_status":"Service Unavailable"}})",
      kSource);
  CHECK(error.canceled);
  CHECK(error.cancel_reason == "etcdserver: no leader");
  CHECK(contains(store_error([] {
                   parse_watch_chunk(R"({"result":{"header":{},"events":[{"type":"RENAME","kv":{}}]}})",
                                     kSource);
                 }),
                 "RENAME"));
}

TEST_CASE("error bodies: etcd's refusals and the stream's, told apart from answers") {
  auto e = parse_error(
      R"({"error":"etcdserver: user name is empty","message":"etcdserver: user name is empty","code":3})",
      kSource);
  REQUIRE(e);
  CHECK(e->code == kCodeInvalidArgument);
  CHECK(e->message == "etcdserver: user name is empty");
  auto s = parse_error(R"({"error":{"grpc_code":14,"message":"etcdserver: no leader"}})", kSource);
  REQUIRE(s);
  CHECK(s->code == kCodeUnavailable);
  CHECK_FALSE(parse_error(kRange, kSource));
  CHECK(contains(store_error([] { parse_error("Not Found\n", kSource); }), kSource));
}

TEST_CASE("what is not an answer: StoreError naming the source and saying what it got") {
  const std::string html = "<html><body><h1>502 Bad Gateway</h1></body></html>";
  const std::string binary("\x00\x00\x00\x05\x01\xff\xfe", 7);
  for (const std::string& bad :
       {std::string(""), html, binary, std::string("null"), std::string("[1,2]"), std::string("\"text\""),
        std::string("{}"), std::string(R"({"header":5})"), kRange.substr(0, kRange.size() / 2),
        kRange.substr(0, kRange.size() - 1), std::string(R"({"header":{"revision":"2x"}})"),
        std::string(R"({"header":{"revision":"99999999999999999999"}})"),
        std::string(R"({"header":{"revision":1.5}})"), std::string(R"({"header":{},"kvs":{"key":"Zm9v"}})"),
        std::string(R"({"header":{},"kvs":[{"key":"Zm9v!"}]})"), std::string(R"({"header":{},"kvs":[7]})"),
        std::string(R"({"header":{},"more":"yes"})"), std::string(1000, '[') + std::string(1000, ']')}) {
    INFO(bad.substr(0, 60));
    const std::string msg = store_error([&] { parse_range(bad, kSource); });
    CHECK(contains(msg, kSource));
  }
  CHECK(contains(store_error([] { parse_range("<html>", kSource); }), "<html>"));  // says what it got
  CHECK(contains(store_error([] { parse_watch_chunk(R"({"header":{}})", kSource); }), "result"));
  CHECK(contains(store_error([] { parse_authenticate(R"({"header":{}})", kSource); }), "token"));
}
