#include "rendezvous/etcd_http.h"

#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>

#include <algorithm>
#include <cstring>
#include <map>
#include <thread>

#include "common/error.h"
#include "common/text.h"
#include "rendezvous/curl_library.h"
#include "rendezvous/etcd_response.h"

namespace ddp::rdzv {
namespace {

// The bound on one answer: etcd's own limits are far below (1.5 MiB per request by default);
// this only keeps a stranger from filling memory.
constexpr size_t kMaxAnswerBytes = size_t{1} << 30;
// The longest one wait of a stream for its socket (curl_multi_poll takes an int of ms).
constexpr Millis kLongestWait{3'600'000};
constexpr Millis kMinAttempt{20};
constexpr Millis kReservePerMember{200};

// A member whose host died stops answering without a reset: keepalive probes each second and
// TCP_USER_TIMEOUT end such a connection within kLinkLossDetection, as the project's own.
int on_socket(void*, curl_socket_t fd, curlsocktype purpose) {
  if (purpose == CURLSOCKTYPE_IPCXN) {
    int count = static_cast<int>(kLinkLossDetection.count() / 1000) - 1;
    unsigned int user_timeout = static_cast<unsigned int>(kLinkLossDetection.count());
    ::setsockopt(fd, IPPROTO_TCP, TCP_KEEPCNT, &count, sizeof count);
    ::setsockopt(fd, IPPROTO_TCP, TCP_USER_TIMEOUT, &user_timeout, sizeof user_timeout);
  }
  return CURL_SOCKOPT_OK;
}

size_t on_data(char* data, size_t size, size_t n, void* user) {
  auto* out = static_cast<std::string*>(user);
  if (out->size() + size * n > kMaxAnswerBytes) return 0;  // curl fails with CURLE_WRITE_ERROR
  out->append(data, size * n);
  return size * n;
}

// "http://h:p" -> "h:p" for messages; https stays spelled out.
std::string display(const std::string& url) { return url.starts_with("http://") ? url.substr(7) : url; }

class HeaderList {
 public:
  explicit HeaderList(const std::string& token, bool stream) {
    add("Content-Type: application/json");
    add("Expect:");  // no 100-continue round trip for large bodies
    if (!token.empty()) add("Authorization: " + token);
    // A watch on a member that lost its leader is cancelled (etcd's WithRequireLeader).
    if (stream) add("Grpc-Metadata-hasleader: true");
  }
  ~HeaderList() { curl().slist_free_all(list_); }
  HeaderList(const HeaderList&) = delete;
  HeaderList& operator=(const HeaderList&) = delete;
  curl_slist* get() const { return list_; }

 private:
  void add(const std::string& h) {
    curl_slist* next = curl().slist_append(list_, h.c_str());
    if (next == nullptr) throw std::bad_alloc();
    list_ = next;
  }
  curl_slist* list_ = nullptr;
};

// The options every request and stream share.
void setup(CURL* c, const EtcdHttpOptions& o, const std::string& url, const std::string& body,
           const HeaderList& headers, char* errors, std::string* answer) {
  curl().easy_setopt(c, CURLOPT_URL, url.c_str());
  curl().easy_setopt(c, CURLOPT_POST, 1L);
  curl().easy_setopt(c, CURLOPT_POSTFIELDS, body.data());
  curl().easy_setopt(c, CURLOPT_POSTFIELDSIZE_LARGE, static_cast<curl_off_t>(body.size()));
  curl().easy_setopt(c, CURLOPT_HTTPHEADER, headers.get());
  curl().easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
  curl().easy_setopt(c, CURLOPT_HTTP_VERSION, static_cast<long>(CURL_HTTP_VERSION_1_1));
  curl().easy_setopt(c, CURLOPT_PROTOCOLS_STR, "http,https");
  curl().easy_setopt(c, CURLOPT_NOPROXY, "*");  // members are reached directly, whatever http_proxy says
  curl().easy_setopt(c, CURLOPT_FOLLOWLOCATION, 0L);
  curl().easy_setopt(c, CURLOPT_TCP_KEEPALIVE, 1L);
  curl().easy_setopt(c, CURLOPT_TCP_KEEPIDLE, 1L);
  curl().easy_setopt(c, CURLOPT_TCP_KEEPINTVL, 1L);
  curl().easy_setopt(c, CURLOPT_SOCKOPTFUNCTION, on_socket);
  curl().easy_setopt(c, CURLOPT_ERRORBUFFER, errors);
  curl().easy_setopt(c, CURLOPT_WRITEFUNCTION, on_data);
  curl().easy_setopt(c, CURLOPT_WRITEDATA, answer);
  if (!o.cacert.empty()) curl().easy_setopt(c, CURLOPT_CAINFO, o.cacert.c_str());
  if (!o.cert.empty()) curl().easy_setopt(c, CURLOPT_SSLCERT, o.cert.c_str());
  if (!o.key.empty()) curl().easy_setopt(c, CURLOPT_SSLKEY, o.key.c_str());
  errors[0] = '\0';
}

// curl's message; a refused connection is just that (curl's text names the port, which the
// caller names already). The errno curl keeps is that of the last connect, so only then is it
// this failure's.
std::string curl_message(CURL* c, CURLcode rc, const char* errors) {
  std::string msg = errors[0] ? errors : curl().easy_strerror(rc);
  long os_errno = 0;
  curl().easy_getinfo(c, CURLINFO_OS_ERRNO, &os_errno);
  if (rc == CURLE_COULDNT_CONNECT && os_errno != 0) return std::strerror(static_cast<int>(os_errno));
  if (rc == CURLE_GOT_NOTHING) return "it closed the connection without an answer (" + msg + ")";
  return msg;
}

std::string content_type(CURL* c) {
  char* type = nullptr;
  curl().easy_getinfo(c, CURLINFO_CONTENT_TYPE, &type);
  return type ? type : "";
}

bool is_json(const std::string& type) { return type.starts_with("application/json"); }

// The TLS failures, which say which file is wrong.
std::string tls_message(CURLcode rc, const EtcdHttpOptions& o, const std::string& msg) {
  const std::string ca = o.cacert.empty() ? "the system's CA certificates" : "the CA file '" + o.cacert + "'";
  switch (rc) {
    case CURLE_PEER_FAILED_VERIFICATION:
      return "its certificate does not verify against " + ca + " (" + msg + ")";
    case CURLE_SSL_CACERT_BADFILE: return "cannot use the CA file '" + o.cacert + "' (" + msg + ")";
    case CURLE_SSL_CERTPROBLEM: return "cannot use the client certificate '" + o.cert + "' (" + msg + ")";
    case CURLE_SSL_CONNECT_ERROR: return "the TLS handshake failed (" + msg + "); CA: " + ca;
    default: return msg;
  }
}

bool is_tls_failure(CURLcode rc) {
  return rc == CURLE_PEER_FAILED_VERIFICATION || rc == CURLE_SSL_CACERT_BADFILE ||
         rc == CURLE_SSL_CERTPROBLEM || rc == CURLE_SSL_CONNECT_ERROR || rc == CURLE_SSL_CIPHER ||
         rc == CURLE_SSL_ENGINE_NOTFOUND || rc == CURLE_SSL_ENGINE_SETFAILED;
}

// The body's start, printable, for messages.
std::string excerpt(const std::string& body) { return printable_excerpt(body, 80); }

// What a non-2xx JSON answer says: etcd's error message, or the body's start.
std::string answer_message(long status, const std::string& body) {
  std::string msg = "HTTP " + std::to_string(status);
  try {
    if (auto e = etcd::parse_error(body, "")) return msg + ": " + e->message;
  } catch (const StoreError&) {
  }
  return body.empty() ? msg : msg + ": '" + excerpt(body) + "'";
}

}  // namespace

std::string etcd_endpoint_url(const std::string& endpoint, const std::string& protocol) {
  if (endpoint.empty()) DDP_THROW(InvalidArgument, "etcd: an empty endpoint");
  if (protocol != "http" && protocol != "https") {
    DDP_THROW(InvalidArgument, "etcd: protocol '", protocol, "' (http or https)");
  }
  std::string url = endpoint;
  const size_t scheme = url.find("://");
  if (scheme == std::string::npos) {
    url = protocol + "://" + url;
  } else if (url.substr(0, scheme) != "http" && url.substr(0, scheme) != "https") {
    DDP_THROW(InvalidArgument, "etcd endpoint '", endpoint, "': the scheme must be http or https");
  }
  const size_t host = url.find("://") + 3;
  while (url.size() > host && url.ends_with('/')) url.pop_back();
  if (url.size() <= host || url[host] == '/')
    DDP_THROW(InvalidArgument, "etcd endpoint '", endpoint, "': no host");
  return url;
}

// ---- EtcdHttp -------------------------------------------------------------------------------

class EtcdHttp::Handle {
 public:
  Handle() : curl_(curl().easy_init()) {
    if (curl_ == nullptr) DDP_THROW(StoreError, "etcd: curl_easy_init failed");
  }
  ~Handle() { curl().easy_cleanup(curl_); }
  Handle(const Handle&) = delete;
  Handle& operator=(const Handle&) = delete;
  CURL* get() const { return curl_; }
  char* errors() { return errors_; }

 private:
  CURL* curl_;
  char errors_[CURL_ERROR_SIZE] = {};
};

struct EtcdHttp::Attempt {
  enum class Outcome { kAnswer, kUnsent, kLost, kNotEtcd };
  Outcome outcome = Outcome::kUnsent;
  EtcdReply reply;
  std::string error;  // what went wrong, for the message
  bool timed_out = false;
};

EtcdHttp::EtcdHttp(EtcdHttpOptions options) : options_(std::move(options)) {
  if (options_.urls.empty()) DDP_THROW(InvalidArgument, "etcd: no endpoints");
  handle_ = std::make_unique<Handle>();
}

EtcdHttp::~EtcdHttp() = default;

EtcdHttp::Attempt EtcdHttp::attempt(size_t index, const std::string& path, const std::string& body,
                                    const std::string& token, const Deadline& deadline, Millis reserve) {
  CURL* c = handle_->get();
  curl().easy_reset(c);  // keeps the connections: a member answers on the one it answered before
  Attempt a;
  a.reply.endpoint = options_.urls[index];
  HeaderList headers(token, false);
  setup(c, options_, options_.urls[index] + path, body, headers, handle_->errors(), &a.reply.body);
  const Millis limit =
      std::max(Millis(1), std::min(deadline.remaining() - reserve, options_.attempt_timeout));
  curl().easy_setopt(c, CURLOPT_TIMEOUT_MS, static_cast<long>(limit.count()));
  curl().easy_setopt(c, CURLOPT_CONNECTTIMEOUT_MS,
                     static_cast<long>(std::min(limit, options_.connect_timeout).count()));
  const CURLcode rc = curl().easy_perform(c);
  using O = Attempt::Outcome;
  if (rc == CURLE_OK) {
    curl().easy_getinfo(c, CURLINFO_RESPONSE_CODE, &a.reply.status);
    const std::string type = content_type(c);
    if (a.reply.status >= 500) {
      a.outcome = O::kLost;
      a.error = answer_message(a.reply.status, a.reply.body);
    } else if (!is_json(type)) {
      a.outcome = O::kNotEtcd;
      a.error = "not etcd's v3 JSON gateway (HTTP " + std::to_string(a.reply.status) + ", " +
                (type.empty() ? "no content type" : type) + ": '" + excerpt(a.reply.body) + "')";
    } else {
      a.outcome = O::kAnswer;
    }
    return a;
  }
  const std::string msg = curl_message(c, rc, handle_->errors());
  long sent = 0;
  curl().easy_getinfo(c, CURLINFO_REQUEST_SIZE, &sent);
  if (is_tls_failure(rc)) {
    a.outcome = O::kNotEtcd;
    a.error = tls_message(rc, options_, msg);
  } else if (rc == CURLE_UNSUPPORTED_PROTOCOL || rc == CURLE_WEIRD_SERVER_REPLY) {
    a.outcome = O::kNotEtcd;
    a.error = "it answered something that is not HTTP (" + msg + ")";
  } else if (rc == CURLE_WRITE_ERROR) {
    a.outcome = O::kNotEtcd;
    a.error = "its answer passed " + std::to_string(kMaxAnswerBytes >> 20) + " MiB";
  } else if (rc == CURLE_OPERATION_TIMEDOUT) {
    a.outcome = sent == 0 ? O::kUnsent : O::kLost;
    a.timed_out = true;
    a.error = "no answer within " + std::to_string(limit.count()) + " ms (" + msg + ")";
  } else {
    a.outcome = sent == 0 ? O::kUnsent : O::kLost;
    a.error = msg;
  }
  return a;
}

// What each member did during one post(): the error it is named with if none answers.
struct EtcdHttp::Tally {
  explicit Tally(const std::vector<std::string>& urls)
      : urls(urls), not_etcd(urls.size(), false), tried(urls.size(), false), last_error(urls.size()) {}

  // Members not tried yet in this call keep a share of the time: a member that hangs (one cut
  // off from its leader) does not hide the others from the call, or from its error.
  Millis reserve(size_t i, const Deadline& deadline) const {
    const size_t untried = std::count(tried.begin(), tried.end(), false) - (tried[i] ? 0 : 1);
    return std::min(deadline.remaining() / 2, kReservePerMember * static_cast<int64_t>(untried));
  }
  void record(size_t i, const Attempt& a) {
    tried[i] = true;
    // A timeout on a later, shorter attempt says less than what the member did before.
    if (last_error[i].empty() || !a.timed_out) last_error[i] = a.error;
    if (a.outcome == Attempt::Outcome::kNotEtcd) not_etcd[i] = true;
  }
  // Groups the members by what they did: "a, b: Connection refused; c: not etcd (...)".
  [[noreturn]] void fail(const std::string& what, const Deadline& deadline) const {
    std::map<std::string, std::string> by_error;
    bool all_not_etcd = true;
    for (size_t i = 0; i < urls.size(); ++i) {
      if (last_error[i].empty()) continue;
      all_not_etcd = all_not_etcd && not_etcd[i];
      std::string& names = by_error[last_error[i]];
      names += (names.empty() ? "" : ", ") + display(urls[i]);
    }
    std::string detail;
    for (const auto& [error, names] : by_error)
      detail.append(detail.empty() ? "" : "; ").append(names).append(": ").append(error);
    if (all_not_etcd) DDP_THROW(StoreError, what, ": no etcd member answered: ", detail);
    DDP_THROW(NetworkError, what, ": could not reach etcd within ", deadline.elapsed().count(),
              " ms: ", detail);
  }

  const std::vector<std::string>& urls;
  std::vector<bool> not_etcd;
  std::vector<bool> tried;
  std::vector<std::string> last_error;
};

EtcdReply EtcdHttp::post(const std::string& path, const std::string& body, const std::string& token,
                         const Deadline& deadline, Idempotence idempotence, const std::string& what) {
  std::lock_guard<std::mutex> lock(mu_);
  const size_t n = options_.urls.size();
  Tally tally(options_.urls);
  Millis backoff = kEtcdFirstBackoff;
  bool first = true;
  while (true) {
    const size_t start = current_.load();
    size_t left = 0;
    for (size_t k = 0; k < n; ++k) {
      const size_t i = (start + k) % n;
      if (tally.not_etcd[i]) continue;
      // An attempt with a few ms left would only replace what the members did with a timeout.
      if (!first && deadline.remaining() < kMinAttempt) break;
      first = false;
      Attempt a = attempt(i, path, body, token, deadline, tally.reserve(i, deadline));
      if (a.outcome == Attempt::Outcome::kAnswer) {
        current_ = i;
        return std::move(a.reply);
      }
      tally.record(i, a);
      if (a.outcome == Attempt::Outcome::kNotEtcd) continue;
      current_ = (i + 1) % n;  // the next call starts with a member that may answer
      if (a.outcome == Attempt::Outcome::kLost && idempotence == Idempotence::kOnce) {
        DDP_THROW(NetworkError, what, ": the connection to ", display(options_.urls[i]),
                  " was lost after the request went out (", a.error,
                  "): it may or may not have been applied");
      }
      ++left;
    }
    if (left == 0 || deadline.remaining() < kMinAttempt) tally.fail(what, deadline);
    std::this_thread::sleep_for(std::min(backoff, deadline.remaining()));
    backoff = std::min(backoff * 2, kEtcdMaxBackoff);
  }
}

// ---- EtcdStream -----------------------------------------------------------------------------

class EtcdStream::Transfer {
 public:
  Transfer(const EtcdHttpOptions& o, const std::string& url, std::string body, const std::string& token)
      : body_(std::move(body)), headers_(token, true) {
    easy_ = curl().easy_init();
    multi_ = curl().multi_init();
    if (easy_ == nullptr || multi_ == nullptr) {
      cleanup();
      DDP_THROW(StoreError, "etcd watch at ", display(url), ": curl initialization failed");
    }
    setup(easy_, o, url, body_, headers_, errors_, &data_);
    curl().easy_setopt(easy_, CURLOPT_CONNECTTIMEOUT_MS, static_cast<long>(o.connect_timeout.count()));
    curl().multi_add_handle(multi_, easy_);
  }
  ~Transfer() { cleanup(); }
  Transfer(const Transfer&) = delete;
  Transfer& operator=(const Transfer&) = delete;

  // Moves the transfer on, waiting for the socket at most `wait` when nothing is there yet.
  void run(Millis wait) {
    int running = 0;
    curl().multi_perform(multi_, &running);
    collect();
    if (done_ || data_.find('\n') != std::string::npos) return;
    curl().multi_poll(multi_, nullptr, 0, static_cast<int>(wait.count()), nullptr);
    curl().multi_perform(multi_, &running);
    collect();
  }
  void wake() noexcept { curl().multi_wakeup(multi_); }
  std::string& data() { return data_; }
  bool done() const { return done_; }
  CURLcode result() const { return result_; }
  long status() const {
    long s = 0;
    curl().easy_getinfo(easy_, CURLINFO_RESPONSE_CODE, &s);
    return s;
  }
  bool json() const { return is_json(content_type(easy_)); }
  std::string message() const { return curl_message(easy_, result_, errors_); }

 private:
  void collect() {
    int queued = 0;
    while (CURLMsg* m = curl().multi_info_read(multi_, &queued)) {
      if (m->msg == CURLMSG_DONE) {
        done_ = true;
        result_ = m->data.result;
      }
    }
  }
  void cleanup() noexcept {
    if (multi_ && easy_) curl().multi_remove_handle(multi_, easy_);
    if (easy_) curl().easy_cleanup(easy_);
    if (multi_) curl().multi_cleanup(multi_);
    easy_ = nullptr;
    multi_ = nullptr;
  }

  std::string body_;
  HeaderList headers_;
  CURL* easy_ = nullptr;
  CURLM* multi_ = nullptr;
  char errors_[CURL_ERROR_SIZE] = {};
  std::string data_;
  bool done_ = false;
  CURLcode result_ = CURLE_OK;
};

EtcdStream::EtcdStream(const EtcdHttpOptions& options, const std::string& url, const std::string& path,
                       const std::string& body, const std::string& token)
    : url_(url), transfer_(std::make_unique<Transfer>(options, url + path, body, token)) {}

EtcdStream::~EtcdStream() = default;

void EtcdStream::cancel() noexcept {
  cancelled_ = true;
  transfer_->wake();
}

void EtcdStream::wake() noexcept {
  woken_ = true;
  transfer_->wake();
}

std::optional<std::string> EtcdStream::take_line() {
  std::string& data = transfer_->data();
  const size_t nl = data.find('\n');
  if (nl == std::string::npos || transfer_->status() != 200 || !transfer_->json()) return std::nullopt;
  std::string line = data.substr(0, nl);
  data.erase(0, nl + 1);
  return line;
}

void EtcdStream::ended() {
  const long status = transfer_->status();
  if (transfer_->result() != CURLE_OK) DDP_THROW(NetworkError, transfer_->message());
  if (status >= 500) DDP_THROW(NetworkError, answer_message(status, transfer_->data()));
  if (status != 200 || !transfer_->json()) {
    DDP_THROW(StoreError, "not etcd's v3 JSON gateway (", answer_message(status, transfer_->data()), ")");
  }
  DDP_THROW(NetworkError, "the member ended the stream");
}

std::optional<std::string> EtcdStream::next_line(const Deadline& deadline) {
  while (true) {
    if (cancelled_ || woken_.exchange(false)) return std::nullopt;
    if (auto line = take_line()) return line;
    if (transfer_->done()) ended();
    if (deadline.expired()) return std::nullopt;
    // No shorter slice: curl's own timers (connecting, keep-alive probes) shorten the wait by
    // themselves, and cancel() and wake() end it; an idle stream costs no wake-ups.
    transfer_->run(std::min(deadline.remaining(), kLongestWait));
  }
}

}  // namespace ddp::rdzv
