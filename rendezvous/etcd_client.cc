#include "rendezvous/etcd_client.h"

#include <nlohmann/json.hpp>

#include "common/error.h"
#include "common/log.h"
#include "common/settings.h"
#include "common/text.h"

namespace ddp::rdzv {
namespace {

using Json = nlohmann::json;

std::string b64(const std::string& s) { return etcd::base64_encode(std::string_view(s)); }

// A key as messages show it: printable, cut short.
std::string shown(const std::string& key) { return printable_excerpt(key, 120); }

std::string range_what(const char* op, const std::string& key, const std::string& range_end) {
  return std::string("etcd ") + op + (range_end.empty() ? " of key '" : " of keys from '") + shown(key) + "'";
}

const char* target_name(etcd::CompareTarget t) {
  switch (t) {
    case etcd::CompareTarget::kVersion: return "VERSION";
    case etcd::CompareTarget::kCreateRevision: return "CREATE";
    case etcd::CompareTarget::kModRevision: return "MOD";
    case etcd::CompareTarget::kValue: return "VALUE";
    case etcd::CompareTarget::kLease: return "LEASE";
  }
  return "VALUE";
}

const char* result_name(etcd::CompareResult r) {
  switch (r) {
    case etcd::CompareResult::kEqual: return "EQUAL";
    case etcd::CompareResult::kGreater: return "GREATER";
    case etcd::CompareResult::kLess: return "LESS";
    case etcd::CompareResult::kNotEqual: return "NOT_EQUAL";
  }
  return "EQUAL";
}

Json compare_json(const etcd::Compare& c) {
  Json j{{"key", b64(c.key)}, {"target", target_name(c.target)}, {"result", result_name(c.result)}};
  const std::string n = std::to_string(c.number);
  switch (c.target) {
    case etcd::CompareTarget::kVersion: j["version"] = n; break;
    case etcd::CompareTarget::kCreateRevision: j["create_revision"] = n; break;
    case etcd::CompareTarget::kModRevision: j["mod_revision"] = n; break;
    case etcd::CompareTarget::kLease: j["lease"] = n; break;
    case etcd::CompareTarget::kValue: j["value"] = etcd::base64_encode(c.value); break;
  }
  return j;
}

Json range_json(const etcd::RangeRequest& r) {
  Json j{{"key", b64(r.key)}};
  if (!r.range_end.empty()) j["range_end"] = b64(r.range_end);
  if (r.count_only) j["count_only"] = true;
  if (r.keys_only) j["keys_only"] = true;
  if (r.limit > 0) j["limit"] = std::to_string(r.limit);
  if (r.revision > 0) j["revision"] = std::to_string(r.revision);
  if (r.max_create_revision > 0) j["max_create_revision"] = std::to_string(r.max_create_revision);
  if (r.oldest_first) {
    j["sort_order"] = "ASCEND";
    j["sort_target"] = "CREATE";
  }
  return j;
}

Json put_json(const etcd::PutRequest& p) {
  Json j{{"key", b64(p.key)}, {"value", etcd::base64_encode(p.value)}};
  if (p.lease != 0) j["lease"] = std::to_string(p.lease);
  if (p.prev_kv) j["prev_kv"] = true;
  return j;
}

Json delete_json(const etcd::DeleteRangeRequest& d) {
  Json j{{"key", b64(d.key)}};
  if (!d.range_end.empty()) j["range_end"] = b64(d.range_end);
  if (d.prev_kv) j["prev_kv"] = true;
  return j;
}

Json op_json(const etcd::RequestOp& op) {
  if (auto* r = std::get_if<etcd::RangeRequest>(&op)) return Json{{"request_range", range_json(*r)}};
  if (auto* p = std::get_if<etcd::PutRequest>(&op)) return Json{{"request_put", put_json(*p)}};
  return Json{{"request_delete_range", delete_json(std::get<etcd::DeleteRangeRequest>(op))}};
}

bool writes(const std::vector<etcd::RequestOp>& ops) {
  for (const auto& op : ops) {
    if (!std::holds_alternative<etcd::RangeRequest>(op)) return true;
  }
  return false;
}

EtcdHttpOptions http_options_of(const EtcdClientOptions& o) {
  EtcdHttpOptions h{.urls = {},
                    .cacert = o.cacert,
                    .cert = o.cert,
                    .key = o.key,
                    .connect_timeout = o.connect_timeout,
                    .attempt_timeout = o.attempt_timeout};
  if (o.endpoints.empty()) DDP_THROW(InvalidArgument, "etcd: no endpoints given");
  for (const auto& e : o.endpoints) h.urls.push_back(etcd_endpoint_url(e, o.protocol));
  return h;
}

// etcd's refusal of a request, as an error naming the call and the member.
[[noreturn]] void refused(const std::string& what, const EtcdReply& reply, const std::string& user) {
  auto e = etcd::parse_error(reply.body, what + " at " + reply.endpoint);
  const std::string msg = e ? e->message : "HTTP " + std::to_string(reply.status);
  std::string hint;
  if (msg.find("user name is empty") != std::string::npos) {
    hint = " (authentication is enabled on the cluster: set DDP_ETCD_USER and DDP_ETCD_PASSWORD)";
  } else if (msg.find("permission denied") != std::string::npos && !user.empty()) {
    hint = " (as user '" + user + "')";
  }
  DDP_THROW(StoreError, what, ": etcd at ", reply.endpoint, " refused it: ", msg, hint);
}

}  // namespace

void EtcdClient::check(const EtcdReply& reply, const std::string& what) const {
  if (reply.status / 100 != 2) refused(what, reply, options_.user);
}

namespace etcd {

std::string prefix_end(const std::string& prefix) {
  std::string end = prefix;
  while (!end.empty()) {
    const unsigned char last = static_cast<unsigned char>(end.back());
    if (last < 0xff) {
      end.back() = static_cast<char>(last + 1);
      return end;
    }
    end.pop_back();
  }
  return std::string(1, '\0');  // every key
}

}  // namespace etcd

EtcdClient::EtcdClient(EtcdClientOptions options)
    : options_(std::move(options)), http_(http_options_of(options_)) {
  if (options_.user.empty()) options_.user = settings::get_or(settings::kEtcdUser, "");
  if (options_.password.empty()) options_.password = settings::get_or(settings::kEtcdPassword, "");
}

EtcdClient::~EtcdClient() = default;

std::string EtcdClient::describe() const {
  std::string out = "etcd at ";
  for (size_t i = 0; i < http_.options().urls.size(); ++i) {
    const std::string& u = http_.options().urls[i];
    out += (i ? ", " : "") + (u.starts_with("http://") ? u.substr(7) : u);
  }
  return out;
}

std::string EtcdClient::authenticate(const Deadline& deadline) {
  const std::string what = "etcd authentication as user '" + options_.user + "'";
  const Json body{{"name", options_.user}, {"password", options_.password}};
  EtcdReply reply = http_.post("/v3/auth/authenticate", body.dump(), "", deadline, Idempotence::kRetry, what);
  const std::string source = what + " at " + reply.endpoint;
  if (reply.status / 100 != 2) {
    auto e = etcd::parse_error(reply.body, source);
    const std::string msg = e ? e->message : "HTTP " + std::to_string(reply.status);
    if (msg.find("authentication is not enabled") != std::string::npos) return "";
    DDP_THROW(StoreError, what, " failed at ", reply.endpoint, ": ", msg);
  }
  return etcd::parse_authenticate(reply.body, source).token;
}

std::string EtcdClient::token(Millis timeout) {
  std::lock_guard<std::mutex> lock(token_mu_);
  if (!authenticated_ && !options_.user.empty()) {
    token_ = authenticate(Deadline(timeout == kUseDefault ? options_.request_timeout : timeout));
    authenticated_ = true;
  }
  return token_;
}

void EtcdClient::refresh_token(const std::string& stale, Millis timeout) {
  std::lock_guard<std::mutex> lock(token_mu_);
  if (options_.user.empty() || token_ != stale) return;  // another thread renewed it already
  token_ = authenticate(Deadline(timeout == kUseDefault ? options_.request_timeout : timeout));
  authenticated_ = true;
}

EtcdReply EtcdClient::call(const std::string& path, const std::string& body, Millis timeout,
                           Idempotence idempotence, const std::string& what) {
  const Deadline deadline(timeout == kUseDefault ? options_.request_timeout : timeout);
  logger("etcd")->trace("{} {}", path, what);  // DDP_LOG_LEVEL=trace: every request, for counting
  std::string t = token(deadline.remaining());
  EtcdReply reply = http_.post(path, body, t, deadline, idempotence, what);
  if (reply.status == 401 && !t.empty()) {
    auto e = etcd::parse_error(reply.body, what + " at " + reply.endpoint);
    if (e && e->code == etcd::kCodeUnauthenticated) {
      refresh_token(t, deadline.remaining());
      reply = http_.post(path, body, token(deadline.remaining()), deadline, idempotence, what);
    }
  }
  return reply;
}

etcd::RangeResponse EtcdClient::range(const etcd::RangeRequest& r, Millis timeout) {
  const std::string what = range_what(r.count_only ? "count" : "range", r.key, r.range_end);
  const EtcdReply reply = call("/v3/kv/range", range_json(r).dump(), timeout, Idempotence::kRetry, what);
  check(reply, what);
  return etcd::parse_range(reply.body, what + " at " + reply.endpoint);
}

etcd::PutResponse EtcdClient::put(const etcd::PutRequest& p, Millis timeout) {
  const std::string what = "etcd put of key '" + shown(p.key) + "'";
  const EtcdReply r = call("/v3/kv/put", put_json(p).dump(), timeout, Idempotence::kRetry, what);
  check(r, what);
  return etcd::parse_put(r.body, what + " at " + r.endpoint);
}

etcd::DeleteRangeResponse EtcdClient::delete_range(const etcd::DeleteRangeRequest& d, Millis timeout) {
  const std::string what = range_what("delete", d.key, d.range_end);
  const EtcdReply r = call("/v3/kv/deleterange", delete_json(d).dump(), timeout, Idempotence::kRetry, what);
  check(r, what);
  return etcd::parse_delete_range(r.body, what + " at " + r.endpoint);
}

etcd::TxnResponse EtcdClient::txn(const etcd::TxnRequest& t, Millis timeout) {
  Json j{{"compare", Json::array()}, {"success", Json::array()}, {"failure", Json::array()}};
  for (const auto& c : t.compare) j["compare"].push_back(compare_json(c));
  for (const auto& op : t.success) j["success"].push_back(op_json(op));
  for (const auto& op : t.failure) j["failure"].push_back(op_json(op));
  std::string first;
  if (!t.compare.empty()) {
    first = t.compare.front().key;
  } else if (!t.success.empty()) {
    std::visit([&](const auto& op) { first = op.key; }, t.success.front());
  }
  const std::string what = "etcd transaction on key '" + shown(first) + "'";
  const Idempotence once = writes(t.success) || writes(t.failure) ? Idempotence::kOnce : Idempotence::kRetry;
  const EtcdReply r = call("/v3/kv/txn", j.dump(), timeout, once, what);
  check(r, what);
  return etcd::parse_txn(r.body, what + " at " + r.endpoint);
}

template <typename Parse>
auto EtcdClient::lease_call(const char* path, const char* field, int64_t value, Millis timeout,
                            const std::string& what, Parse parse) {
  const Json body{{field, std::to_string(value)}};
  const EtcdReply r = call(path, body.dump(), timeout, Idempotence::kRetry, what);
  check(r, what);
  return parse(r.body, what + " at " + r.endpoint);
}

etcd::LeaseGrantResponse EtcdClient::grant_lease(int64_t ttl_seconds, Millis timeout) {
  if (ttl_seconds < 1)
    DDP_THROW(InvalidArgument, "etcd lease grant: a TTL of ", ttl_seconds, " s (at least 1)");
  const std::string what = "etcd lease grant of " + std::to_string(ttl_seconds) + " s";
  return lease_call("/v3/lease/grant", "TTL", ttl_seconds, timeout, what, etcd::parse_lease_grant);
}

int64_t EtcdClient::keep_alive(int64_t lease, Millis timeout) {
  const std::string what = "etcd keep-alive of lease " + std::to_string(lease);
  return std::max<int64_t>(
      0, lease_call("/v3/lease/keepalive", "ID", lease, timeout, what, etcd::parse_lease_keepalive).ttl);
}

etcd::LeaseTimeToLiveResponse EtcdClient::time_to_live(int64_t lease, Millis timeout) {
  const std::string what = "etcd time-to-live of lease " + std::to_string(lease);
  return lease_call("/v3/lease/timetolive", "ID", lease, timeout, what, etcd::parse_lease_time_to_live);
}

bool EtcdClient::revoke(int64_t lease, Millis timeout) {
  const std::string what = "etcd revoke of lease " + std::to_string(lease);
  const Json body{{"ID", std::to_string(lease)}};
  const EtcdReply r = call("/v3/lease/revoke", body.dump(), timeout, Idempotence::kRetry, what);
  if (r.status / 100 != 2) {
    auto e = etcd::parse_error(r.body, what + " at " + r.endpoint);
    if (e && e->code == etcd::kCodeNotFound) return false;
  }
  check(r, what);
  etcd::parse_header_only(r.body, what + " at " + r.endpoint);
  return true;
}

}  // namespace ddp::rdzv
