#include "rendezvous/tcp_store_server.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/resource.h>
#include <sys/socket.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <unordered_map>
#include <vector>

#include "common/deadline.h"
#include "common/error.h"
#include "common/log.h"
#include "common/socket.h"
#include "rendezvous/tcp_store_protocol.h"

namespace ddp::rdzv {
namespace {

using proto::ErrorCode;
using proto::MsgType;
using proto::ProtocolError;
using proto::Reader;
using proto::Writer;

constexpr uint64_t kListenerId = 0;
constexpr uint64_t kWakeId = 1;
constexpr size_t kReadChunk = 64 * 1024;
// Stop reading from a connection whose replies pile up (it does not read): back-pressure.
constexpr size_t kOutHighWater = 4u << 20;
// Before the handshake a client gets no more than this: no large buffers for strangers.
constexpr size_t kMaxHelloSize = 8192;
// Out of descriptors: how long to stop accepting before trying again.
constexpr Millis kAcceptPause{50};

std::string peer_name(int fd) {
  sockaddr_storage ss{};
  socklen_t len = sizeof(ss);
  if (::getpeername(fd, reinterpret_cast<sockaddr*>(&ss), &len) != 0) return "?";
  char host[INET6_ADDRSTRLEN] = {};
  uint16_t port = 0;
  if (ss.ss_family == AF_INET6) {
    auto* a = reinterpret_cast<sockaddr_in6*>(&ss);
    ::inet_ntop(AF_INET6, &a->sin6_addr, host, sizeof(host));
    port = ntohs(a->sin6_port);
  } else {
    auto* a = reinterpret_cast<sockaddr_in*>(&ss);
    ::inet_ntop(AF_INET, &a->sin_addr, host, sizeof(host));
    port = ntohs(a->sin_port);
  }
  return net::Endpoint{host, port}.str();
}

// Compares without an early exit so the token cannot be guessed byte by byte from timing.
bool token_equal(const std::string& a, const std::string& b) {
  if (a.size() != b.size()) return false;
  unsigned diff = 0;
  for (size_t i = 0; i < a.size(); ++i) diff |= static_cast<unsigned char>(a[i] ^ b[i]);
  return diff == 0;
}

struct Conn {
  uint64_t id = 0;
  Fd fd;
  std::string peer;
  std::vector<uint8_t> in;
  size_t in_pos = 0;
  std::vector<uint8_t> out;
  size_t out_pos = 0;
  uint32_t events = 0;
  bool authed = false;
  bool close_after_flush = false;
  // The one pending get/wait of this connection, parked under waiting_on.
  bool waiting = false;
  MsgType wait_type = MsgType::kWait;
  std::vector<std::string> wait_keys;
  std::string waiting_on;

  size_t out_pending() const { return out.size() - out_pos; }
};

}  // namespace

class TCPStoreServer::Loop {
 public:
  Loop(TCPStoreServer* owner, Fd listener, std::string token)
      : owner_(owner), listener_(std::move(listener)), token_(std::move(token)), log_(logger("store")) {
    epoll_ = Fd(::epoll_create1(EPOLL_CLOEXEC));
    if (!epoll_) DDP_THROW_ERRNO("epoll_create1 (store server)");
    net::set_nonblocking(listener_.get());
    add_fd(listener_.get(), kListenerId, EPOLLIN);
    add_fd(owner_->wake_.get(), kWakeId, EPOLLIN);
  }

  void run() noexcept;

 private:
  void add_fd(int fd, uint64_t id, uint32_t events) {
    epoll_event ev{};
    ev.events = events;
    ev.data.u64 = id;
    if (::epoll_ctl(epoll_.get(), EPOLL_CTL_ADD, fd, &ev) != 0) DDP_THROW_ERRNO("epoll_ctl(ADD)");
  }
  void accept_all();
  void on_event(Conn& c, uint32_t events);
  bool read_some(Conn& c);
  void process_input(Conn& c);
  void handle_frame(Conn& c, Reader& r);
  void handle_hello(Conn& c, Reader& r);
  void handle_request(Conn& c, MsgType type, Reader& r);
  void handle_add(Conn& c, Reader& r);
  void handle_compare_set(Conn& c, Reader& r);
  void handle_query(Conn& c, MsgType type, Reader& r);
  void start_wait(Conn& c, MsgType type, std::vector<std::string> keys);
  bool try_finish_wait(Conn& c);
  void park(Conn& c, const std::string& key);
  void unpark(Conn& c);
  void notify(const std::string& key);
  void reply_error(Conn& c, ErrorCode code, const std::string& message);
  void send(Conn& c, const std::vector<uint8_t>& frame);
  bool flush(Conn& c);
  void update_interest(Conn& c);
  void close_conn(uint64_t id, const std::string& why, bool warn);
  std::vector<std::string> missing(const std::vector<std::string>& keys) const;

  TCPStoreServer* owner_;
  Fd listener_;
  Fd epoll_;
  std::string token_;
  std::shared_ptr<spdlog::logger> log_;
  bool listener_paused_ = false;
  Clock::time_point resume_accept_;
  bool stopping_ = false;
  uint64_t next_id_ = 2;
  std::unordered_map<uint64_t, std::unique_ptr<Conn>> conns_;
  std::unordered_map<std::string, Bytes> data_;
  std::unordered_map<std::string, std::vector<uint64_t>> waiters_;  // key -> parked conn ids
  std::vector<uint64_t> to_close_;
};

void TCPStoreServer::Loop::run() noexcept {
  std::vector<epoll_event> events(256);
  while (!stopping_) {
    int timeout = listener_paused_ ? static_cast<int>(kAcceptPause.count()) : -1;
    int n = ::epoll_wait(epoll_.get(), events.data(), static_cast<int>(events.size()), timeout);
    if (n < 0) {
      if (errno == EINTR) continue;
      log_->error("store server: epoll_wait failed: {}; stopping", std::strerror(errno));
      return;
    }
    if (listener_paused_ && Clock::now() >= resume_accept_) {
      listener_paused_ = false;
      add_fd(listener_.get(), kListenerId, EPOLLIN);
    }
    for (int i = 0; i < n; ++i) {
      uint64_t id = events[i].data.u64;
      try {
        if (id == kWakeId) {
          stopping_ = true;
        } else if (id == kListenerId) {
          accept_all();
        } else if (auto it = conns_.find(id); it != conns_.end()) {
          on_event(*it->second, events[i].events);
        }
      } catch (const ProtocolError& e) {
        close_conn(id, std::string("protocol error: ") + e.message(), true);
      } catch (const std::exception& e) {
        // Only this connection's request failed (e.g. out of memory for a huge value).
        close_conn(id, std::string("error: ") + e.what(), true);
      }
    }
    for (uint64_t id : to_close_) close_conn(id, "closed after its last reply", false);
    to_close_.clear();
  }
  log_->debug("store server on port {}: stopped with {} connections", owner_->port_, conns_.size());
}

void TCPStoreServer::Loop::accept_all() {
  while (!listener_paused_) {
    int fd = ::accept4(listener_.get(), nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (fd < 0) {
      if (errno == EINTR || errno == ECONNABORTED) continue;
      if (errno == EAGAIN || errno == EWOULDBLOCK) return;
      if (errno == EMFILE || errno == ENFILE || errno == ENOBUFS || errno == ENOMEM) {
        // Out of descriptors: stop accepting for a moment instead of spinning on the listener.
        log_->warn("store server: accept failed ({}) with {} connections; pausing accepts",
                   std::strerror(errno), conns_.size());
        ::epoll_ctl(epoll_.get(), EPOLL_CTL_DEL, listener_.get(), nullptr);
        listener_paused_ = true;
        resume_accept_ = Clock::now() + kAcceptPause;
        return;
      }
      log_->warn("store server: accept failed: {}", std::strerror(errno));
      return;
    }
    auto c = std::make_unique<Conn>();
    c->id = next_id_++;
    c->fd = Fd(fd);
    c->peer = peer_name(fd);
    net::set_nodelay(fd);
    c->events = EPOLLIN;
    add_fd(fd, c->id, c->events);
    conns_.emplace(c->id, std::move(c));
    owner_->num_connections_.store(conns_.size());
  }
}

void TCPStoreServer::Loop::on_event(Conn& c, uint32_t events) {
  uint64_t id = c.id;
  if (events & EPOLLOUT) {
    if (!flush(c)) return close_conn(id, "send failed", false);
  }
  if (events & (EPOLLIN | EPOLLHUP | EPOLLERR)) {
    if (!read_some(c)) {
      bool mid_request = c.in.size() > c.in_pos;
      return close_conn(id, mid_request ? "client vanished mid-request" : "client disconnected",
                        mid_request);
    }
    process_input(c);
    if (!flush(c)) return close_conn(id, "send failed", false);
  }
  update_interest(c);
}

// Reads what is available; false when the peer closed or the socket failed.
bool TCPStoreServer::Loop::read_some(Conn& c) {
  while (true) {
    if (c.in_pos > 0 && c.in_pos == c.in.size()) {
      c.in.clear();
      c.in_pos = 0;
    }
    size_t old = c.in.size();
    c.in.resize(old + kReadChunk);
    ssize_t n = ::recv(c.fd.get(), c.in.data() + old, kReadChunk, 0);
    c.in.resize(old + static_cast<size_t>(std::max<ssize_t>(n, 0)));
    if (n > 0) {
      if (static_cast<size_t>(n) < kReadChunk) return true;
      continue;
    }
    if (n == 0) return false;
    if (errno == EINTR) continue;
    return errno == EAGAIN || errno == EWOULDBLOCK;
  }
}

void TCPStoreServer::Loop::process_input(Conn& c) {
  while (!c.close_after_flush && c.out_pending() < kOutHighWater) {
    size_t avail = c.in.size() - c.in_pos;
    if (avail < proto::kFrameHeaderSize) break;
    uint32_t len = proto::decode_length(c.in.data() + c.in_pos);
    size_t limit = c.authed ? proto::kMaxFrameSize : kMaxHelloSize;
    if (len == 0 || len > limit) {
      DDP_THROW(rdzv::proto::ProtocolError, "frame length ", len, " is outside 1..", limit);
    }
    if (avail < proto::kFrameHeaderSize + len) break;
    Reader r(c.in.data() + c.in_pos + proto::kFrameHeaderSize, len);
    c.in_pos += proto::kFrameHeaderSize + len;
    handle_frame(c, r);
  }
  if (c.in_pos > 0 && c.in_pos * 2 >= c.in.size()) {
    c.in.erase(c.in.begin(), c.in.begin() + static_cast<std::ptrdiff_t>(c.in_pos));
    c.in_pos = 0;
  }
}

void TCPStoreServer::Loop::handle_frame(Conn& c, Reader& r) {
  MsgType type = r.type();
  if (!c.authed) {
    if (type != MsgType::kHello) {
      DDP_THROW(rdzv::proto::ProtocolError, "expected hello, got message type ", static_cast<int>(type));
    }
    return handle_hello(c, r);
  }
  if (type == MsgType::kCancel) {
    r.done();
    if (c.waiting) {
      unpark(c);
      Writer w(MsgType::kTimedOut);
      w.strs(missing(c.wait_keys));
      c.waiting = false;
      c.wait_keys.clear();
      owner_->num_waiting_.fetch_sub(1);
      send(c, w.finish());
    }
    return;  // a Cancel that finds nothing pending lost the race with the reply: ignored
  }
  if (c.waiting) {
    DDP_THROW(rdzv::proto::ProtocolError, proto::type_name(type), " request while a wait is pending");
  }
  handle_request(c, type, r);
}

void TCPStoreServer::Loop::handle_hello(Conn& c, Reader& r) {
  uint32_t magic = r.u32();
  if (magic != proto::kMagic) DDP_THROW(rdzv::proto::ProtocolError, "bad magic in hello: ", magic);
  uint16_t version = r.u16();
  std::string token = r.str(4096);
  r.done();
  if (version != proto::kVersion) {
    log_->warn("store server: refused client {}: protocol version {} (server speaks {})", c.peer,
               version, proto::kVersion);
    return reply_error(c, ErrorCode::kBadVersion,
                       detail::str("protocol version ", version, " is not supported (server speaks ",
                                   proto::kVersion, ")"));
  }
  if (!token_.empty() && !token_equal(token, token_)) {
    log_->warn("store server: refused client {}: {} job token", c.peer, token.empty() ? "missing" : "wrong");
    return reply_error(c, ErrorCode::kRefused,
                       token.empty() ? "the job token is missing (set DDP_JOB_TOKEN)"
                                     : "the job token was refused");
  }
  c.authed = true;
  Writer w(MsgType::kOk);
  w.u16(proto::kVersion);
  send(c, w.finish());
}

void TCPStoreServer::Loop::handle_request(Conn& c, MsgType type, Reader& r) {
  switch (type) {
    case MsgType::kSet: {
      std::string key = r.key();
      Bytes value = r.bytes(kMaxValueSize);
      r.done();
      data_[key] = std::move(value);
      send(c, Writer(MsgType::kOk).finish());
      return notify(key);
    }
    case MsgType::kGet: {
      std::string key = r.key();
      r.done();
      return start_wait(c, type, {std::move(key)});
    }
    case MsgType::kWait: {
      auto keys = r.keys();
      r.done();
      return start_wait(c, type, std::move(keys));
    }
    case MsgType::kAdd:
      return handle_add(c, r);
    case MsgType::kCompareSet:
      return handle_compare_set(c, r);
    default:
      return handle_query(c, type, r);
  }
}

void TCPStoreServer::Loop::handle_add(Conn& c, Reader& r) {
  std::string key = r.key();
  int64_t delta = r.i64();
  r.done();
  int64_t value = delta;
  if (auto it = data_.find(key); it != data_.end()) {
    try {
      value += parse_counter(key, it->second);
    } catch (const InvalidArgument& e) {
      return reply_error(c, ErrorCode::kInvalidArgument, e.message());
    }
  }
  data_[key] = Store::to_bytes(std::to_string(value));
  send(c, Writer(MsgType::kOk).i64(value).finish());
  notify(key);
}

void TCPStoreServer::Loop::handle_compare_set(Conn& c, Reader& r) {
  std::string key = r.key();
  Bytes expected = r.bytes(kMaxValueSize);
  Bytes desired = r.bytes(kMaxValueSize);
  r.done();
  auto it = data_.find(key);
  if (it == data_.end() ? !expected.empty() : it->second != expected) {
    send(c, Writer(MsgType::kOk).bytes(it == data_.end() ? expected : it->second).finish());
    return;
  }
  data_[key] = desired;
  send(c, Writer(MsgType::kOk).bytes(desired).finish());
  notify(key);
}

// Requests that only read (or delete, which wakes nobody).
void TCPStoreServer::Loop::handle_query(Conn& c, MsgType type, Reader& r) {
  Writer w(MsgType::kOk);
  switch (type) {
    case MsgType::kCheck: {
      auto keys = r.keys();
      r.done();
      w.u8(missing(keys).empty() ? 1 : 0);
      break;
    }
    case MsgType::kDelete: {
      std::string key = r.key();
      r.done();
      w.u8(data_.erase(key) > 0 ? 1 : 0);
      break;
    }
    case MsgType::kNumKeys:
      r.done();
      w.i64(static_cast<int64_t>(data_.size()));
      break;
    default:
      DDP_THROW(rdzv::proto::ProtocolError, "unknown request type ", static_cast<int>(type));
  }
  send(c, w.finish());
}

void TCPStoreServer::Loop::start_wait(Conn& c, MsgType type, std::vector<std::string> keys) {
  c.waiting = true;
  c.wait_type = type;
  c.wait_keys = std::move(keys);
  owner_->num_waiting_.fetch_add(1);
  try_finish_wait(c);
}

// Answers the pending wait when every key exists, else parks it under the first missing key.
bool TCPStoreServer::Loop::try_finish_wait(Conn& c) {
  for (const auto& k : c.wait_keys) {
    if (!data_.count(k)) {
      park(c, k);
      return false;
    }
  }
  Writer w(MsgType::kOk);
  if (c.wait_type == MsgType::kGet) w.bytes(data_.at(c.wait_keys.front()));
  c.waiting = false;
  c.wait_keys.clear();
  owner_->num_waiting_.fetch_sub(1);
  send(c, w.finish());
  return true;
}

void TCPStoreServer::Loop::park(Conn& c, const std::string& key) {
  waiters_[key].push_back(c.id);
  c.waiting_on = key;
}

void TCPStoreServer::Loop::unpark(Conn& c) {
  auto it = waiters_.find(c.waiting_on);
  if (it == waiters_.end()) return;
  auto& ids = it->second;
  ids.erase(std::remove(ids.begin(), ids.end(), c.id), ids.end());
  if (ids.empty()) waiters_.erase(it);
}

void TCPStoreServer::Loop::notify(const std::string& key) {
  auto it = waiters_.find(key);
  if (it == waiters_.end()) return;
  std::vector<uint64_t> ids = std::move(it->second);
  waiters_.erase(it);
  for (uint64_t id : ids) {
    auto cit = conns_.find(id);
    if (cit == conns_.end() || !cit->second->waiting) continue;
    Conn& waiter = *cit->second;
    if (try_finish_wait(waiter)) {
      if (!flush(waiter)) {
        to_close_.push_back(id);
      } else {
        update_interest(waiter);
      }
    }
  }
}

std::vector<std::string> TCPStoreServer::Loop::missing(const std::vector<std::string>& keys) const {
  std::vector<std::string> out;
  for (const auto& k : keys) {
    if (!data_.count(k)) out.push_back(k);
  }
  return out;
}

void TCPStoreServer::Loop::reply_error(Conn& c, ErrorCode code, const std::string& message) {
  Writer w(MsgType::kError);
  w.u8(static_cast<uint8_t>(code)).str(message);
  send(c, w.finish());
  if (code != ErrorCode::kInvalidArgument) c.close_after_flush = true;
}

void TCPStoreServer::Loop::send(Conn& c, const std::vector<uint8_t>& frame) {
  if (c.out_pos == c.out.size()) {
    c.out.clear();
    c.out_pos = 0;
  }
  c.out.insert(c.out.end(), frame.begin(), frame.end());
}

// Writes what the socket takes; false when the socket failed.
bool TCPStoreServer::Loop::flush(Conn& c) {
  while (c.out_pending() > 0) {
    ssize_t n = ::send(c.fd.get(), c.out.data() + c.out_pos, c.out_pending(), MSG_NOSIGNAL);
    if (n > 0) {
      c.out_pos += static_cast<size_t>(n);
    } else if (n < 0 && errno == EINTR) {
      continue;
    } else if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
      return true;
    } else {
      return false;
    }
  }
  c.out.clear();
  c.out_pos = 0;
  if (c.close_after_flush) to_close_.push_back(c.id);
  return true;
}

void TCPStoreServer::Loop::update_interest(Conn& c) {
  uint32_t want = 0;
  if (c.out_pending() > 0) want |= EPOLLOUT;
  if (c.out_pending() < kOutHighWater && !c.close_after_flush) want |= EPOLLIN;
  if (want == c.events) return;
  epoll_event ev{};
  ev.events = want;
  ev.data.u64 = c.id;
  if (::epoll_ctl(epoll_.get(), EPOLL_CTL_MOD, c.fd.get(), &ev) == 0) c.events = want;
}

void TCPStoreServer::Loop::close_conn(uint64_t id, const std::string& why, bool warn) {
  auto it = conns_.find(id);
  if (it == conns_.end()) return;
  Conn& c = *it->second;
  if (warn) {
    log_->warn("store server: closing connection from {}: {}", c.peer, why);
  } else {
    log_->debug("store server: closing connection from {}: {}", c.peer, why);
  }
  if (c.waiting) {
    unpark(c);
    owner_->num_waiting_.fetch_sub(1);
  }
  ::epoll_ctl(epoll_.get(), EPOLL_CTL_DEL, c.fd.get(), nullptr);
  conns_.erase(it);
  owner_->num_connections_.store(conns_.size());
}

uint64_t raise_fd_limit() {
  rlimit rl{};
  if (::getrlimit(RLIMIT_NOFILE, &rl) != 0) return 0;
  if (rl.rlim_cur < rl.rlim_max) {
    rlimit want = rl;
    want.rlim_cur = rl.rlim_max;
    if (::setrlimit(RLIMIT_NOFILE, &want) == 0) rl = want;
  }
  return rl.rlim_cur;
}

TCPStoreServer::TCPStoreServer(const TCPStoreServerOptions& options) {
  raise_fd_limit();
  Fd listener = net::listen_tcp({options.host, options.port});
  port_ = net::local_port(listener.get());
  wake_ = Fd(::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK));
  if (!wake_) DDP_THROW_ERRNO("eventfd (store server)");
  loop_ = std::make_unique<Loop>(this, std::move(listener), options.job_token);
  thread_ = std::thread([this] { loop_->run(); });
  logger("store")->debug("store server listening on port {}", port_);
}

TCPStoreServer::~TCPStoreServer() noexcept {
  uint64_t one = 1;
  ssize_t rc = ::write(wake_.get(), &one, sizeof(one));
  (void)rc;
  if (thread_.joinable()) thread_.join();
}

}  // namespace ddp::rdzv
