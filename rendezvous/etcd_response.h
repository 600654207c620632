#pragma once
// etcd's v3 JSON gateway, the answers: bytes to structs, and the base64 its keys and values
// travel in. Pure (no I/O, no curl) so that a fuzzer can feed it anything.
//
// - Every parse_* throws StoreError, naming `source` (the endpoint and the call), for anything
//   that is not the answer etcd gives: not JSON, truncated, a missing or mistyped field, bad
//   base64, an integer out of range. Never a crash, never another exception type (bad_alloc
//   aside). Fields the gateway omits when they hold their default (0, false, empty) are optional.
// - int64 fields arrive as JSON strings ("42"); numbers are accepted too.
// - parse_error tells an error body ({"error": ..., "code": N}) from an answer; the watch
//   stream's own error chunks ({"error": {"grpc_code": N, "message": ...}}) are parsed too.
// Thread-safe (no state).
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "rendezvous/store.h"

namespace ddp::rdzv::etcd {

// gRPC status codes that etcd answers with (the ones the client acts on).
inline constexpr int kCodeInvalidArgument = 3;
inline constexpr int kCodeDeadlineExceeded = 4;
inline constexpr int kCodeNotFound = 5;
inline constexpr int kCodeUnavailable = 14;
inline constexpr int kCodeUnauthenticated = 16;

std::string base64_encode(std::string_view bytes);
std::string base64_encode(const Bytes& bytes);
// Standard alphabet with padding (Go's base64.StdEncoding, which the gateway writes); anything
// else is a StoreError naming `what`.
std::string base64_decode(std::string_view text, const std::string& what);

struct Header {
  int64_t revision = 0;
};

struct KeyValue {
  std::string key;
  Bytes value;
  int64_t create_revision = 0;
  int64_t mod_revision = 0;
  int64_t version = 0;
  int64_t lease = 0;
};

struct RangeResponse {
  Header header;
  std::vector<KeyValue> kvs;
  int64_t count = 0;
  bool more = false;
};

struct PutResponse {
  Header header;
  std::optional<KeyValue> prev_kv;
};

struct DeleteRangeResponse {
  Header header;
  int64_t deleted = 0;
  std::vector<KeyValue> prev_kvs;
};

// One of a transaction's results, in the order of its requests.
struct ResponseOp {
  enum class Kind { kRange, kPut, kDeleteRange };
  Kind kind = Kind::kRange;
  RangeResponse range;
  PutResponse put;
  DeleteRangeResponse delete_range;
};

struct TxnResponse {
  Header header;
  bool succeeded = false;
  std::vector<ResponseOp> responses;
};

struct LeaseGrantResponse {
  Header header;
  int64_t id = 0;
  int64_t ttl = 0;  // seconds
};

// TTL 0 (or less): the lease is gone (expired or revoked).
struct LeaseKeepAliveResponse {
  Header header;
  int64_t id = 0;
  int64_t ttl = 0;
};

// A lease's time left, in whole seconds rounded down (etcd truncates); -1: the lease is gone
// (expired, revoked, or never granted).
struct LeaseTimeToLiveResponse {
  Header header;
  int64_t id = 0;
  int64_t ttl = -1;
  int64_t granted_ttl = 0;  // the TTL it was granted (and is renewed to) in seconds
};

struct AuthenticateResponse {
  Header header;
  std::string token;
};

struct Event {
  enum class Type { kPut, kDelete };
  Type type = Type::kPut;
  KeyValue kv;  // a DELETE carries the key and its mod_revision only
};

// One chunk of the watch stream.
struct WatchResponse {
  Header header;
  int64_t watch_id = 0;
  bool created = false;
  bool canceled = false;
  int64_t compact_revision = 0;  // > 0: the start revision was compacted away
  std::string cancel_reason;
  std::vector<Event> events;
};

struct ErrorBody {
  int code = 0;  // gRPC status code
  std::string message;
};

// The error an answer carries, or nullopt when `body` is JSON that is not an error body.
// StoreError when `body` is not JSON at all.
std::optional<ErrorBody> parse_error(std::string_view body, const std::string& source);

RangeResponse parse_range(std::string_view body, const std::string& source);
PutResponse parse_put(std::string_view body, const std::string& source);
DeleteRangeResponse parse_delete_range(std::string_view body, const std::string& source);
TxnResponse parse_txn(std::string_view body, const std::string& source);
LeaseGrantResponse parse_lease_grant(std::string_view body, const std::string& source);
// The keepalive answer is one {"result": {...}} chunk of a stream.
LeaseKeepAliveResponse parse_lease_keepalive(std::string_view body, const std::string& source);
LeaseTimeToLiveResponse parse_lease_time_to_live(std::string_view body, const std::string& source);
// Any answer that carries nothing but a header (lease revoke).
Header parse_header_only(std::string_view body, const std::string& source);
AuthenticateResponse parse_authenticate(std::string_view body, const std::string& source);
// One line of the watch stream: {"result": {...}}, or a stream error ({"error": {...}}),
// which is returned as a canceled response whose cancel_reason holds the message.
WatchResponse parse_watch_chunk(std::string_view line, const std::string& source);

}  // namespace ddp::rdzv::etcd
