#pragma once
// EtcdClient: a small client of etcd's v3 API through its JSON gateway (HTTP/1.1, libcurl):
// range, put, txn, deleterange and leases; watches are EtcdWatch (etcd_watch.h). Keys and
// values are bytes; a call fails over between the members (etcd_http.h).
// - Authentication: a user (options.user, else DDP_ETCD_USER) and password (options.password,
//   else DDP_ETCD_PASSWORD) get a token on first use, and again once when etcd calls it invalid.
// - TLS: protocol "https" (or https:// endpoints), cacert, and cert + key for client certificates.
// - Errors: no member reachable: NetworkError naming each member and the call; an answer that is
//   not etcd's, a wrong password, a certificate that does not verify, a refused request:
//   StoreError naming the member (the user, the CA file) or quoting etcd.
// - Every call ends within its timeout (kUseDefault: options.request_timeout).
// Thread-safe: calls are serialized on one connection; watches have their own.
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <variant>
#include <vector>

#include "common/timeouts.h"
#include "rendezvous/etcd_http.h"
#include "rendezvous/etcd_response.h"

namespace ddp::rdzv {

struct EtcdClientOptions {
  std::vector<std::string> endpoints;  // "host:port" or "http(s)://host:port", one per member
  std::string protocol = "http";       // for endpoints given without a scheme: http or https
  std::string cacert;                  // PEM: the CA that signed the members' certificates
  std::string cert;                    // PEM: a client certificate and its key, if etcd asks
  std::string key;
  std::string user;                // empty: DDP_ETCD_USER; empty there too: no authentication
  std::string password;            // empty: DDP_ETCD_PASSWORD
  Millis request_timeout{10'000};  // one call, fail-over included
  Millis connect_timeout{2'000};   // connecting to one member
  Millis attempt_timeout{5'000};   // one member's answer, before the next member is tried
};

namespace etcd {

enum class CompareTarget { kVersion, kCreateRevision, kModRevision, kValue, kLease };
enum class CompareResult { kEqual, kGreater, kLess, kNotEqual };

struct Compare {
  std::string key;
  CompareTarget target = CompareTarget::kValue;
  CompareResult result = CompareResult::kEqual;
  int64_t number = 0;  // version, revision or lease
  Bytes value;         // kValue
};

struct RangeRequest {
  std::string key;
  std::string range_end;  // empty: the key alone; prefix_end(key): every key under it
  bool count_only = false;
  bool keys_only = false;
  int64_t limit = 0;
  int64_t revision = 0;             // 0: the newest
  int64_t max_create_revision = 0;  // > 0: only keys created by then (etcd's count ignores it)
  bool oldest_first = false;        // sorted by creation, oldest first (with limit 1: the oldest)
};

struct PutRequest {
  std::string key;
  Bytes value;
  int64_t lease = 0;  // 0: none
  bool prev_kv = false;
};

struct DeleteRangeRequest {
  std::string key;
  std::string range_end;
  bool prev_kv = false;
};

using RequestOp = std::variant<RangeRequest, PutRequest, DeleteRangeRequest>;

struct TxnRequest {
  std::vector<Compare> compare;
  std::vector<RequestOp> success;
  std::vector<RequestOp> failure;
};

// The range_end that selects every key starting with `prefix` ("\0" for all keys).
std::string prefix_end(const std::string& prefix);

}  // namespace etcd

class EtcdClient {
 public:
  // InvalidArgument for no endpoints or a bad one; nothing is sent yet.
  explicit EtcdClient(EtcdClientOptions options);
  ~EtcdClient();
  EtcdClient(const EtcdClient&) = delete;
  EtcdClient& operator=(const EtcdClient&) = delete;

  etcd::RangeResponse range(const etcd::RangeRequest& request, Millis timeout = kUseDefault);
  etcd::PutResponse put(const etcd::PutRequest& request, Millis timeout = kUseDefault);
  etcd::DeleteRangeResponse delete_range(const etcd::DeleteRangeRequest& request,
                                         Millis timeout = kUseDefault);
  // A transaction that writes is sent once: a connection lost after it went out is a
  // NetworkError saying it may have been applied (read-only ones fail over like range).
  etcd::TxnResponse txn(const etcd::TxnRequest& request, Millis timeout = kUseDefault);

  // A lease of `ttl_seconds` (at least 1); keys put under it go when it expires or is revoked.
  etcd::LeaseGrantResponse grant_lease(int64_t ttl_seconds, Millis timeout = kUseDefault);
  // Renews the lease; returns its TTL in seconds, 0 when it is gone (expired or revoked).
  int64_t keep_alive(int64_t lease, Millis timeout = kUseDefault);
  // The lease's time left (-1 when it is gone) and granted TTL, as etcd's leader knows them.
  etcd::LeaseTimeToLiveResponse time_to_live(int64_t lease, Millis timeout = kUseDefault);
  // Revokes the lease, deleting its keys; false when it was gone already.
  bool revoke(int64_t lease, Millis timeout = kUseDefault);

  // For EtcdWatch: the transport's options, the member to start with, the token to send
  // ("" without authentication; authenticates on first use), and a new token once etcd called
  // `stale` invalid.
  const EtcdHttpOptions& http_options() const { return http_.options(); }
  size_t current_member() const { return http_.current(); }
  std::string token(Millis timeout = kUseDefault);
  void refresh_token(const std::string& stale, Millis timeout = kUseDefault);
  // "etcd at 127.0.0.1:2379, 127.0.0.1:2479", for messages.
  std::string describe() const;
  Millis request_timeout() const { return options_.request_timeout; }
  const EtcdClientOptions& options() const { return options_; }

 private:
  // POSTs `body` with the token (renewed once when etcd calls it invalid) and returns the
  // answer, which check() turns into etcd's refusal unless it is 2xx. `what` names the call.
  EtcdReply call(const std::string& path, const std::string& body, Millis timeout, Idempotence idempotence,
                 const std::string& what);
  void check(const EtcdReply& reply, const std::string& what) const;
  // A lease request (safe to send again): the body {field: value}, the answer checked, then
  // read by `parse` (etcd_response.h's parser of that answer).
  template <typename Parse>
  auto lease_call(const char* path, const char* field, int64_t value, Millis timeout, const std::string& what,
                  Parse parse);
  std::string authenticate(const Deadline& deadline);

  EtcdClientOptions options_;
  EtcdHttp http_;
  std::mutex token_mu_;
  std::string token_;
  bool authenticated_ = false;
};

}  // namespace ddp::rdzv
