#pragma once
// HTTP/1.1 to etcd's JSON gateway over libcurl: the transport under EtcdClient (etcd_client.h).
// EtcdHttp::post sends one JSON request to the members in turn (round-robin from the one that
// answered last) until one answers as etcd's gateway does or the deadline passes:
// - unreachable, or a 5xx (no leader): tried again after the others, with a backoff;
// - sent and then lost (timeout, reset, 5xx): sent to the next member only with
//   Idempotence::kRetry (a transaction may have been applied), else a NetworkError at once;
// - not etcd (no HTTP, not JSON, an unverified certificate): left out for the rest of the call;
// - none answered: NetworkError or StoreError naming every member, what each did, and `what`.
// JSON answers (2xx and 4xx) are returned for the caller to parse. Thread-safe: one curl handle
// per EtcdHttp, calls serialized. EtcdStream: one streamed POST (a watch) to one member on a
// handle of its own, driven on the caller's thread; cancel() from any thread ends next_line().
#include <atomic>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "common/deadline.h"

namespace ddp::rdzv {

// The pause between rounds of failed attempts at the members: doubling from the first, to the most.
inline constexpr Millis kEtcdFirstBackoff{50};
inline constexpr Millis kEtcdMaxBackoff{1'000};

struct EtcdHttpOptions {
  std::vector<std::string> urls;  // "http://127.0.0.1:2379", one per member
  std::string cacert;             // PEM files for https (curl's CAINFO, SSLCERT, SSLKEY); empty: none
  std::string cert;
  std::string key;
  Millis connect_timeout{2'000};  // TCP (and TLS) connect to one member
  Millis attempt_timeout{5'000};  // one member's answer; then the next member is tried
};

struct EtcdReply {
  long status = 0;
  std::string body;
  std::string endpoint;  // the member that answered, as given ("http://127.0.0.1:2379")
};

enum class Idempotence { kRetry, kOnce };

class EtcdHttp {
 public:
  explicit EtcdHttp(EtcdHttpOptions options);
  ~EtcdHttp();
  EtcdHttp(const EtcdHttp&) = delete;
  EtcdHttp& operator=(const EtcdHttp&) = delete;

  // See the header comment. `token` goes in the Authorization header when not empty.
  EtcdReply post(const std::string& path, const std::string& body, const std::string& token,
                 const Deadline& deadline, Idempotence idempotence, const std::string& what);

  const EtcdHttpOptions& options() const { return options_; }
  // The member the next call starts with (the last that answered).
  size_t current() const { return current_.load(); }

 private:
  class Handle;
  struct Attempt;
  struct Tally;
  Attempt attempt(size_t index, const std::string& path, const std::string& body, const std::string& token,
                  const Deadline& deadline, Millis reserve);

  EtcdHttpOptions options_;
  std::mutex mu_;
  std::unique_ptr<Handle> handle_;
  std::atomic<size_t> current_{0};
};

class EtcdStream {
 public:
  // Starts the POST; nothing blocks until next_line().
  EtcdStream(const EtcdHttpOptions& options, const std::string& url, const std::string& path,
             const std::string& body, const std::string& token);
  ~EtcdStream();
  EtcdStream(const EtcdStream&) = delete;
  EtcdStream& operator=(const EtcdStream&) = delete;

  // The next newline-delimited chunk, or nullopt when the deadline passed or cancel() was
  // called. The stream's end or failure is a NetworkError with curl's message (or etcd's, for
  // a 5xx); an answer that is not a JSON stream (another status, another content type) is a
  // StoreError carrying the body's start. The caller names the member.
  std::optional<std::string> next_line(const Deadline& deadline);
  // Any thread: next_line() returns nullopt now and from now on. noexcept.
  void cancel() noexcept;
  // Any thread: the next_line() blocked now (or the next one) returns nullopt once. noexcept.
  void wake() noexcept;
  bool cancelled() const { return cancelled_.load(); }
  const std::string& url() const { return url_; }

 private:
  class Transfer;
  std::optional<std::string> take_line();
  [[noreturn]] void ended();

  std::string url_;
  std::unique_ptr<Transfer> transfer_;
  std::atomic<bool> cancelled_{false};
  std::atomic<bool> woken_{false};
};

// "127.0.0.1:2379" -> "http://127.0.0.1:2379" (with `protocol`); a URL is kept as it is,
// less a trailing '/'. InvalidArgument for an empty endpoint or a scheme other than http(s).
std::string etcd_endpoint_url(const std::string& endpoint, const std::string& protocol);

}  // namespace ddp::rdzv
