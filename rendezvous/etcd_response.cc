#include "rendezvous/etcd_response.h"

#include <array>
#include <charconv>

#include "common/error.h"
#include "common/safe_json.h"
#include "common/text.h"

namespace ddp::rdzv::etcd {
namespace {

using safe_json::Json;

constexpr char kAlphabet[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
// Answers carry values of up to etcd's request limit (1.5 MiB by default) in base64, many of
// them in a range or a watch batch: the bound only keeps a stranger from filling memory.
constexpr size_t kMaxAnswerBytes = size_t{1} << 30;
constexpr int kMaxDepth = 16;  // etcd's answers nest 6 deep

constexpr std::array<int8_t, 256> decode_table() {
  std::array<int8_t, 256> t{};
  for (auto& v : t) v = -1;
  for (int i = 0; i < 64; ++i) t[static_cast<unsigned char>(kAlphabet[i])] = static_cast<int8_t>(i);
  return t;
}
constexpr std::array<int8_t, 256> kDecode = decode_table();

// The start of an answer, printable, for messages: what the endpoint said instead.
std::string excerpt(std::string_view body) { return printable_excerpt(body, 80); }

[[noreturn]] void malformed(const std::string& source, const std::string& why) {
  DDP_THROW(StoreError, source, ": not an answer of etcd's v3 JSON gateway: ", why);
}

Json parse_json(std::string_view body, const std::string& source) {
  std::string error;
  auto doc = safe_json::try_parse(body, {.max_bytes = kMaxAnswerBytes, .max_depth = kMaxDepth}, &error);
  if (!doc) {
    if (body.empty()) malformed(source, "an empty answer");
    malformed(source, error + " (the answer starts '" + excerpt(body) + "')");
  }
  if (!doc->is_object()) malformed(source, "a JSON " + safe_json::type_name(*doc) + ", not an object");
  return std::move(*doc);
}

const Json* find(const Json& object, const char* name) {
  auto it = object.find(name);
  return it == object.end() || it->is_null() ? nullptr : &*it;
}

const Json& object_at(const Json& parent, const char* name, const std::string& source) {
  const Json* v = find(parent, name);
  if (v == nullptr) malformed(source, std::string("no '") + name + "'");
  if (!v->is_object()) malformed(source, std::string("'") + name + "' is " + safe_json::type_name(*v));
  return *v;
}

// An int64 the gateway writes as a string ("42"), or as a number; absent: 0.
int64_t int_at(const Json& object, const char* name, const std::string& source) {
  const Json* v = find(object, name);
  if (v == nullptr) return 0;
  if (v->is_string()) {
    const std::string& s = v->get_ref<const std::string&>();
    int64_t out = 0;
    auto [ptr, ec] = std::from_chars(s.data(), s.data() + s.size(), out);
    if (s.empty() || ec != std::errc() || ptr != s.data() + s.size()) {
      malformed(source, std::string("'") + name + "' is not an integer: '" + excerpt(s) + "'");
    }
    return out;
  }
  if (auto n = safe_json::as_int(*v)) return *n;
  malformed(source, std::string("'") + name + "' is " + safe_json::type_name(*v) + ", not an integer");
}

bool bool_at(const Json& object, const char* name, const std::string& source) {
  const Json* v = find(object, name);
  if (v == nullptr) return false;
  if (!v->is_boolean()) malformed(source, std::string("'") + name + "' is " + safe_json::type_name(*v));
  return v->get<bool>();
}

std::string string_at(const Json& object, const char* name, const std::string& source) {
  const Json* v = find(object, name);
  if (v == nullptr) return "";
  if (!v->is_string()) malformed(source, std::string("'") + name + "' is " + safe_json::type_name(*v));
  return v->get<std::string>();
}

std::string bytes_at(const Json& object, const char* name, const std::string& source) {
  try {
    return base64_decode(string_at(object, name, source), std::string("'") + name + "'");
  } catch (const StoreError& e) {
    malformed(source, e.message());
  }
}

const Json* array_at(const Json& object, const char* name, const std::string& source) {
  const Json* v = find(object, name);
  if (v != nullptr && !v->is_array()) {
    malformed(source, std::string("'") + name + "' is " + safe_json::type_name(*v) + ", not an array");
  }
  return v;
}

Header header_of(const Json& answer, const std::string& source) {
  const Json& h = object_at(answer, "header", source);
  return Header{.revision = int_at(h, "revision", source)};
}

// Nested answers (a transaction's) carry a header with the revision only, or none.
Header optional_header(const Json& answer, const std::string& source) {
  if (find(answer, "header") == nullptr) return {};
  return header_of(answer, source);
}

KeyValue key_value(const Json& v, const std::string& source) {
  if (!v.is_object()) malformed(source, "a key-value is " + safe_json::type_name(v));
  const std::string value = bytes_at(v, "value", source);
  return KeyValue{.key = bytes_at(v, "key", source),
                  .value = Bytes(value.begin(), value.end()),
                  .create_revision = int_at(v, "create_revision", source),
                  .mod_revision = int_at(v, "mod_revision", source),
                  .version = int_at(v, "version", source),
                  .lease = int_at(v, "lease", source)};
}

std::vector<KeyValue> key_values(const Json& object, const char* name, const std::string& source) {
  std::vector<KeyValue> out;
  if (const Json* kvs = array_at(object, name, source)) {
    for (const Json& kv : *kvs) out.push_back(key_value(kv, source));
  }
  return out;
}

RangeResponse range_of(const Json& answer, Header header, const std::string& source) {
  return RangeResponse{.header = header,
                       .kvs = key_values(answer, "kvs", source),
                       .count = int_at(answer, "count", source),
                       .more = bool_at(answer, "more", source)};
}

PutResponse put_of(const Json& answer, Header header, const std::string& source) {
  PutResponse out{.header = header, .prev_kv = std::nullopt};
  if (const Json* prev = find(answer, "prev_kv")) out.prev_kv = key_value(*prev, source);
  return out;
}

DeleteRangeResponse delete_of(const Json& answer, Header header, const std::string& source) {
  return DeleteRangeResponse{.header = header,
                             .deleted = int_at(answer, "deleted", source),
                             .prev_kvs = key_values(answer, "prev_kvs", source)};
}

ResponseOp response_op(const Json& v, const std::string& source) {
  if (!v.is_object()) malformed(source, "a transaction response is " + safe_json::type_name(v));
  ResponseOp op;
  if (const Json* r = find(v, "response_range")) {
    if (!r->is_object()) malformed(source, "'response_range' is " + safe_json::type_name(*r));
    op.kind = ResponseOp::Kind::kRange;
    op.range = range_of(*r, optional_header(*r, source), source);
  } else if (const Json* p = find(v, "response_put")) {
    if (!p->is_object()) malformed(source, "'response_put' is " + safe_json::type_name(*p));
    op.kind = ResponseOp::Kind::kPut;
    op.put = put_of(*p, optional_header(*p, source), source);
  } else if (const Json* d = find(v, "response_delete_range")) {
    if (!d->is_object()) malformed(source, "'response_delete_range' is " + safe_json::type_name(*d));
    op.kind = ResponseOp::Kind::kDeleteRange;
    op.delete_range = delete_of(*d, optional_header(*d, source), source);
  } else {
    malformed(source, "a transaction response of no known kind");
  }
  return op;
}

Event event_of(const Json& v, const std::string& source) {
  if (!v.is_object()) malformed(source, "a watch event is " + safe_json::type_name(v));
  Event e;
  const std::string type = string_at(v, "type", source);
  if (type == "DELETE") {
    e.type = Event::Type::kDelete;
  } else if (type.empty() || type == "PUT") {
    e.type = Event::Type::kPut;
  } else {
    malformed(source, "a watch event of type '" + excerpt(type) + "'");
  }
  e.kv = key_value(object_at(v, "kv", source), source);
  return e;
}

// A stream error chunk: {"error": {"grpc_code": 14, "http_code": 503, "message": "..."}}.
WatchResponse stream_error(const Json& error, const std::string& source) {
  if (!error.is_object()) malformed(source, "'error' is " + safe_json::type_name(error));
  WatchResponse out;
  out.canceled = true;
  out.cancel_reason = string_at(error, "message", source);
  if (out.cancel_reason.empty())
    out.cancel_reason = "stream error " + std::to_string(int_at(error, "grpc_code", source));
  return out;
}

}  // namespace

std::string base64_encode(std::string_view bytes) {
  std::string out;
  out.reserve((bytes.size() + 2) / 3 * 4);
  size_t i = 0;
  auto at = [&](size_t k) { return static_cast<uint32_t>(static_cast<unsigned char>(bytes[k])); };
  for (; i + 3 <= bytes.size(); i += 3) {
    const uint32_t n = (at(i) << 16) | (at(i + 1) << 8) | at(i + 2);
    for (int s = 18; s >= 0; s -= 6) out += kAlphabet[(n >> s) & 63];
  }
  const size_t rest = bytes.size() - i;
  if (rest > 0) {
    const uint32_t n = (at(i) << 16) | (rest == 2 ? at(i + 1) << 8 : 0);
    out += kAlphabet[(n >> 18) & 63];
    out += kAlphabet[(n >> 12) & 63];
    out += rest == 2 ? kAlphabet[(n >> 6) & 63] : '=';
    out += '=';
  }
  return out;
}

std::string base64_encode(const Bytes& bytes) {
  return base64_encode(std::string_view(reinterpret_cast<const char*>(bytes.data()), bytes.size()));
}

std::string base64_decode(std::string_view text, const std::string& what) {
  if (text.size() % 4 != 0) DDP_THROW(StoreError, what, ": base64 of ", text.size(), " characters (not 4k)");
  size_t pad = 0;
  if (!text.empty() && text.back() == '=') pad = text[text.size() - 2] == '=' ? 2 : 1;
  std::string out;
  out.reserve(text.size() / 4 * 3);
  for (size_t i = 0; i < text.size(); i += 4) {
    const bool last = i + 4 == text.size();
    uint32_t n = 0;
    for (size_t k = 0; k < 4; ++k) {
      const char c = text[i + k];
      const bool padding = last && k >= 4 - pad;
      const int8_t d = padding ? int8_t{0} : kDecode[static_cast<unsigned char>(c)];
      if ((padding && c != '=') || d < 0) {
        DDP_THROW(StoreError, what, ": not base64 (character ", i + k, " is '", excerpt({&c, 1}), "')");
      }
      n = (n << 6) | static_cast<uint32_t>(d);
    }
    const size_t keep = last ? 3 - pad : 3;
    // Padding must follow zero bits: "QQ==" is "A", "QR==" is no encoding at all.
    if (last && ((pad == 1 && (n & 0xff)) || (pad == 2 && (n & 0xffff)))) {
      DDP_THROW(StoreError, what, ": not base64 (bits after the last byte)");
    }
    for (size_t k = 0; k < keep; ++k) out += static_cast<char>((n >> (16 - 8 * k)) & 0xff);
  }
  return out;
}

std::optional<ErrorBody> parse_error(std::string_view body, const std::string& source) {
  const Json doc = parse_json(body, source);
  const Json* error = find(doc, "error");
  if (error == nullptr) return std::nullopt;
  if (error->is_object()) {
    const WatchResponse w = stream_error(*error, source);
    return ErrorBody{.code = static_cast<int>(int_at(*error, "grpc_code", source)),
                     .message = w.cancel_reason};
  }
  ErrorBody out{.code = static_cast<int>(int_at(doc, "code", source)),
                .message = string_at(doc, "message", source)};
  if (out.message.empty()) out.message = string_at(doc, "error", source);
  return out;
}

RangeResponse parse_range(std::string_view body, const std::string& source) {
  const Json doc = parse_json(body, source);
  return range_of(doc, header_of(doc, source), source);
}

PutResponse parse_put(std::string_view body, const std::string& source) {
  const Json doc = parse_json(body, source);
  return put_of(doc, header_of(doc, source), source);
}

DeleteRangeResponse parse_delete_range(std::string_view body, const std::string& source) {
  const Json doc = parse_json(body, source);
  return delete_of(doc, header_of(doc, source), source);
}

TxnResponse parse_txn(std::string_view body, const std::string& source) {
  const Json doc = parse_json(body, source);
  TxnResponse out{
      .header = header_of(doc, source), .succeeded = bool_at(doc, "succeeded", source), .responses = {}};
  if (const Json* rs = array_at(doc, "responses", source)) {
    for (const Json& r : *rs) out.responses.push_back(response_op(r, source));
  }
  return out;
}

LeaseGrantResponse parse_lease_grant(std::string_view body, const std::string& source) {
  const Json doc = parse_json(body, source);
  if (std::string e = string_at(doc, "error", source); !e.empty()) DDP_THROW(StoreError, source, ": ", e);
  LeaseGrantResponse out{
      .header = header_of(doc, source), .id = int_at(doc, "ID", source), .ttl = int_at(doc, "TTL", source)};
  if (out.id == 0) malformed(source, "a lease grant without an 'ID'");
  return out;
}

LeaseKeepAliveResponse parse_lease_keepalive(std::string_view body, const std::string& source) {
  const Json doc = parse_json(body, source);
  if (const Json* error = find(doc, "error")) {
    DDP_THROW(StoreError, source, ": ", stream_error(*error, source).cancel_reason);
  }
  const Json& r = object_at(doc, "result", source);
  return LeaseKeepAliveResponse{
      .header = header_of(r, source), .id = int_at(r, "ID", source), .ttl = int_at(r, "TTL", source)};
}

LeaseTimeToLiveResponse parse_lease_time_to_live(std::string_view body, const std::string& source) {
  const Json doc = parse_json(body, source);
  if (std::string e = string_at(doc, "error", source); !e.empty()) DDP_THROW(StoreError, source, ": ", e);
  return LeaseTimeToLiveResponse{.header = header_of(doc, source),
                                 .id = int_at(doc, "ID", source),
                                 .ttl = int_at(doc, "TTL", source),
                                 .granted_ttl = int_at(doc, "grantedTTL", source)};
}

Header parse_header_only(std::string_view body, const std::string& source) {
  const Json doc = parse_json(body, source);
  return header_of(doc, source);
}

AuthenticateResponse parse_authenticate(std::string_view body, const std::string& source) {
  const Json doc = parse_json(body, source);
  AuthenticateResponse out{.header = header_of(doc, source), .token = string_at(doc, "token", source)};
  if (out.token.empty()) malformed(source, "an authentication answer without a 'token'");
  return out;
}

WatchResponse parse_watch_chunk(std::string_view line, const std::string& source) {
  const Json doc = parse_json(line, source);
  if (const Json* error = find(doc, "error")) return stream_error(*error, source);
  const Json& r = object_at(doc, "result", source);
  WatchResponse out;
  out.header = header_of(r, source);
  out.watch_id = int_at(r, "watch_id", source);
  out.created = bool_at(r, "created", source);
  out.canceled = bool_at(r, "canceled", source);
  out.compact_revision = int_at(r, "compact_revision", source);
  out.cancel_reason = string_at(r, "cancel_reason", source);
  if (const Json* events = array_at(r, "events", source)) {
    for (const Json& e : *events) out.events.push_back(event_of(e, source));
  }
  return out;
}

}  // namespace ddp::rdzv::etcd
