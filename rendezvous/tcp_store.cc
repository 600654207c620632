#include "rendezvous/tcp_store.h"

#include <poll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <thread>

#include "common/auth.h"
#include "common/error.h"
#include "common/log.h"
#include "common/settings.h"
#include "rendezvous/tcp_store_handshake.h"
#include "rendezvous/tcp_store_protocol.h"
#include "rendezvous/tcp_store_server.h"

namespace ddp::rdzv {
namespace {

using proto::ErrorCode;
using proto::MsgType;
using proto::Reader;
using proto::Writer;

const char* const kWorkersKey = "__ddp_store/workers";
const char* const kWorkersReadyKey = "__ddp_store/workers_ready";

bool is_wildcard(const std::string& host) { return host.empty() || host == "0.0.0.0" || host == "::"; }

Reader reply_fields(const std::vector<uint8_t>& payload) {
  return Reader(payload.data() + 1, payload.size() - 1);
}

}  // namespace

TCPStore::TCPStore(TCPStoreOptions options) : Store(options.timeout), options_(std::move(options)) {
  wake_ = Fd(::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC));
  if (!wake_) DDP_THROW_ERRNO("eventfd");
  if (options_.connect_timeout == kUseDefault)
    options_.connect_timeout = std::min(timeout(), kDefaultConnectTimeout);
  std::string token =
      !options_.job_token.empty() ? options_.job_token : settings::get_or(settings::kJobToken, "");
  endpoint_ = {options_.host, options_.port};
  if (options_.is_server) {
    server_ = std::make_unique<TCPStoreServer>(TCPStoreServerOptions{options_.host, options_.port, token});
    endpoint_.port = server_->port();
    if (is_wildcard(options_.host)) endpoint_.host = options_.host == "::" ? "::1" : "127.0.0.1";
  } else if (options_.port == 0) {
    DDP_THROW(InvalidArgument, "TCPStore client for '", options_.host,
              "' needs a port (0 only with is_server)");
  }
  connect(token);
  if (options_.wait_workers > 0) wait_for_workers(options_.wait_workers);
}

TCPStore::~TCPStore() = default;

std::unique_ptr<Store> TCPStore::clone() {
  TCPStoreOptions o = options_;
  o.host = endpoint_.host;
  o.port = endpoint_.port;
  o.is_server = false;
  o.wait_workers = 0;
  o.timeout = timeout();
  return std::make_unique<TCPStore>(o);
}

void TCPStore::interrupt() noexcept {
  const uint64_t one = 1;
  [[maybe_unused]] const ssize_t n = ::write(wake_.get(), &one, sizeof(one));
}

// Connects and shakes hands (tcp_store_handshake.h), all within connect_timeout. A connection
// closed during the handshake (a server shedding connections under a flood of strangers) is
// retried until the deadline; a refusal, a version mismatch or a server that cannot prove the
// token is final.
void TCPStore::connect(const std::string& token) {
  const Deadline deadline(options_.connect_timeout);
  for (Millis backoff{10};; backoff = std::min(backoff * 2, Millis(1000))) {
    try {
      fd_ = net::connect_tcp(endpoint_, deadline);
      net::set_keepalive(fd_.get());
      broken_.clear();
      return handshake(token, deadline);
    } catch (const NetworkError& e) {
      fd_.reset();
      if (deadline.expired()) connect_timed_out(e);
      logger("store")->debug("store handshake with {} lost ({}); retrying", endpoint_.str(), e.message());
      std::this_thread::sleep_for(std::min(backoff, deadline.remaining()));
    } catch (const TimeoutError& e) {
      fd_.reset();
      connect_timed_out(e);
    } catch (const Error&) {
      fd_.reset();
      throw;
    }
  }
}

void TCPStore::connect_timed_out(const Error& last) {
  DDP_THROW(TimeoutError, "store at ", endpoint_.str(), ": no connection with a finished handshake within ",
            options_.connect_timeout.count(), " ms (last: ", last.message(), ")");
}

void TCPStore::handshake(const std::string& token, const Deadline& deadline) {
  const auth::Nonce nonce = auth::random_nonce();
  const auto hello = proto::hello_frame(nonce);
  net::send_all(fd_.get(), hello.data(), hello.size(), deadline, "store handshake with " + endpoint_.str());
  auto reply = read_frame(deadline, "handshake");
  proto::Challenge challenge;
  try {
    challenge = proto::parse_challenge(reply.data(), reply.size());
  } catch (const proto::ProtocolError& e) {
    DDP_THROW(StoreError, "store at ", endpoint_.str(), " answered the handshake with something else (",
              e.message(), "): is it a ddp store of this version?");
  }
  if (!auth::equal(challenge.proof, auth::prove(token, proto::kServerLabel, nonce, challenge.server_nonce))) {
    // Nothing was proven to it, and the token never travels: a squatter learned nothing.
    if (token.empty()) {
      DDP_THROW(StoreError, "store at ", endpoint_.str(),
                " requires a job token and this client has none: the job token is missing (set ",
                settings::kJobToken.name, ")");
    }
    DDP_THROW(StoreError, "store at ", endpoint_.str(),
              " could not prove it holds this client's job token: the tokens differ, or another program "
              "listens on that port; the job token was refused");
  }
  const auto proof = proto::auth_frame(token, nonce, challenge.server_nonce);
  net::send_all(fd_.get(), proof.data(), proof.size(), deadline, "store handshake with " + endpoint_.str());
  reply = read_frame(deadline, "handshake");
  Reader r = reply_fields(reply);
  if (static_cast<MsgType>(reply[0]) != MsgType::kOk || r.u16() != proto::kVersion) {
    DDP_THROW(StoreError, "store at ", endpoint_.str(),
              " answered the handshake with another protocol version");
  }
}

void TCPStore::wait_for_workers(int count) {
  if (add(kWorkersKey, 1) == count) set(kWorkersReadyKey, "1");
  if (server_) wait({kWorkersReadyKey});
}

void TCPStore::lost(const char* op, const std::string& why) {
  broken_ = why;
  fd_.reset();
  DDP_THROW(NetworkError, "store ", op, ": lost the connection to the store at ", endpoint_.str(), ": ", why);
}

// Reads one reply frame; Error frames become exceptions, anything but Ok/TimedOut is lost().
std::vector<uint8_t> TCPStore::read_frame(const Deadline& deadline, const char* op) {
  std::vector<uint8_t> payload;
  std::string what = "store " + std::string(op) + " reply from " + endpoint_.str();
  try {
    uint8_t header[proto::kFrameHeaderSize];
    net::recv_all(fd_.get(), header, sizeof(header), deadline, what);
    uint32_t len = proto::decode_length(header);
    if (len == 0 || len > proto::kMaxFrameSize) lost(op, detail::str("bad reply frame length ", len));
    payload.resize(len);
    net::recv_all(fd_.get(), payload.data(), len, deadline, what);
  } catch (const TimeoutError& e) {
    lost(op, e.message());
  } catch (const NetworkError& e) {
    if (broken_.empty()) lost(op, e.message());
    throw;
  }
  auto type = static_cast<MsgType>(payload[0]);
  if (type == MsgType::kOk || type == MsgType::kTimedOut || type == MsgType::kChallenge) return payload;
  if (type != MsgType::kError) lost(op, detail::str("unexpected reply type ", static_cast<int>(type)));
  Reader r = reply_fields(payload);
  auto code = static_cast<ErrorCode>(r.u8());
  std::string message = r.str(proto::kMaxFrameSize);
  switch (code) {
    case ErrorCode::kInvalidArgument: DDP_THROW(InvalidArgument, message);
    case ErrorCode::kRefused:
      fd_.reset();
      broken_ = message;
      DDP_THROW(StoreError, "store at ", endpoint_.str(), " refused this client: ", message);
    default:
      fd_.reset();
      broken_ = message;
      DDP_THROW(StoreError, "store at ", endpoint_.str(), " rejected ", op, ": ", message);
  }
}

std::vector<uint8_t> TCPStore::call(const std::vector<uint8_t>& frame, const char* op,
                                    const std::string& key) {
  std::lock_guard<std::mutex> lock(mu_);
  if (!broken_.empty()) {
    DDP_THROW(NetworkError, "store ", op, "('", key, "'): the connection to the store at ", endpoint_.str(),
              " was lost earlier: ", broken_);
  }
  // Non-blocking requests: a short store timeout (meant for get/wait) must not cut a reply that
  // is merely slow under load, which would cost the connection.
  Deadline deadline(std::max(timeout(), options_.connect_timeout));
  try {
    net::send_all(fd_.get(), frame.data(), frame.size(), deadline, "store " + std::string(op));
  } catch (const Error& e) {
    lost(op, e.message());
  }
  auto reply = read_frame(deadline, op);
  if (static_cast<MsgType>(reply[0]) != MsgType::kOk) lost(op, "unexpected timed_out reply");
  return reply;
}

std::vector<uint8_t> TCPStore::call_wait(const std::vector<uint8_t>& frame, const char* op,
                                         const std::vector<std::string>& keys, Millis timeout) {
  std::lock_guard<std::mutex> lock(mu_);
  if (!broken_.empty()) {
    DDP_THROW(NetworkError, "store ", op, "('", keys.front(), "'): the connection to the store at ",
              endpoint_.str(), " was lost earlier: ", broken_);
  }
  Deadline deadline(timeout);
  try {
    net::send_all(fd_.get(), frame.data(), frame.size(), deadline, "store " + std::string(op));
  } catch (const Error& e) {
    lost(op, e.message());
  }
  // Wait for the reply to start; at the deadline (or an interrupt()) cancel the wait on the
  // server, which then answers exactly once (TimedOut, or Ok when the keys won the race).
  pollfd p[2] = {{fd_.get(), POLLIN, 0}, {wake_.get(), POLLIN, 0}};
  int rc;
  do {
    rc = ::poll(p, 2, deadline.poll_ms());
  } while ((rc < 0 && errno == EINTR) || (rc == 0 && !deadline.expired()));
  if (rc < 0) lost(op, std::string("poll: ") + std::strerror(errno));
  const bool replied = p[0].revents != 0;
  if (!replied) {
    Writer cancel(MsgType::kCancel);
    try {
      const auto& frame = cancel.finish();
      net::send_all(fd_.get(), frame.data(), frame.size(), Deadline(kStoreCancelGrace), "store cancel");
    } catch (const Error& e) {
      lost(op, e.message());
    }
  }
  auto reply = read_frame(replied ? deadline : Deadline(kStoreCancelGrace), op);
  if (static_cast<MsgType>(reply[0]) == MsgType::kTimedOut) {
    if (p[1].revents != 0) {
      DDP_THROW(NetworkError, "store ", op, "('", keys.front(), "') on ", endpoint_.str(),
                ": interrupted (TCPStore::interrupt)");
    }
    Reader r = reply_fields(reply);
    throw_wait_timeout(op, r.keys(), timeout);
  }
  return reply;
}

void TCPStore::do_set(const std::string& key, const Bytes& value) {
  Writer w(MsgType::kSet);
  w.str(key).bytes(value);
  call(w.finish(), "set", key);
}

Bytes TCPStore::do_get(const std::string& key, Millis timeout) {
  Writer w(MsgType::kGet);
  w.str(key);
  auto reply = call_wait(w.finish(), "get", {key}, timeout);
  return reply_fields(reply).bytes(kMaxValueSize);
}

int64_t TCPStore::do_add(const std::string& key, int64_t delta) {
  Writer w(MsgType::kAdd);
  w.str(key).i64(delta);
  auto reply = call(w.finish(), "add", key);
  return reply_fields(reply).i64();
}

Bytes TCPStore::do_compare_set(const std::string& key, const Bytes& expected, const Bytes& desired) {
  Writer w(MsgType::kCompareSet);
  w.str(key).bytes(expected).bytes(desired);
  auto reply = call(w.finish(), "compare_set", key);
  return reply_fields(reply).bytes(kMaxValueSize);
}

bool TCPStore::do_check(const std::vector<std::string>& keys) {
  if (keys.empty()) return true;
  Writer w(MsgType::kCheck);
  w.strs(keys);
  auto reply = call(w.finish(), "check", keys.front());
  return reply_fields(reply).u8() != 0;
}

void TCPStore::do_wait(const std::vector<std::string>& keys, Millis timeout) {
  Writer w(MsgType::kWait);
  w.strs(keys);
  call_wait(w.finish(), "wait", keys, timeout);
}

bool TCPStore::do_delete_key(const std::string& key) {
  Writer w(MsgType::kDelete);
  w.str(key);
  auto reply = call(w.finish(), "delete_key", key);
  return reply_fields(reply).u8() != 0;
}

int64_t TCPStore::do_num_keys() {
  Writer w(MsgType::kNumKeys);
  auto reply = call(w.finish(), "num_keys", "");
  return reply_fields(reply).i64();
}

}  // namespace ddp::rdzv
