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
#include <deque>
#include <unordered_map>
#include <vector>

#include "common/deadline.h"
#include "common/error.h"
#include "common/host_addresses.h"
#include "common/log.h"
#include "common/socket.h"
#include "rendezvous/tcp_store_server_loop.h"

namespace ddp::rdzv {
namespace {

using namespace server_detail;
using proto::ProtocolError;

std::string peer_name(int fd) {
  sockaddr_storage ss{};
  socklen_t len = sizeof(ss);
  if (::getpeername(fd, reinterpret_cast<sockaddr*>(&ss), &len) != 0) return "?";
  return net::endpoint_text(reinterpret_cast<const sockaddr*>(&ss));
}

// A buffer that drained gives back what a large frame made it grow to.
void release_if_large(std::vector<uint8_t>& buf) {
  if (buf.capacity() > kReadChunk) std::vector<uint8_t>().swap(buf);
}

}  // namespace

void TCPStoreServer::Loop::run() noexcept {
  try {
    serve();
  } catch (const std::exception& e) {
    // Out of memory outside one connection's request: clients get their connections closed and
    // new ones refused (an error at once) rather than a server that no longer answers.
    log_->error("store server on port {}: stopped: {}", owner_->port_, e.what());
    conns_.clear();
    listener_.reset();
  }
}

void TCPStoreServer::Loop::serve() {
  std::vector<epoll_event> events(256);
  while (!stopping_) {
    int n = ::epoll_wait(epoll_.get(), events.data(), static_cast<int>(events.size()), next_timeout_ms());
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
    expire_handshakes();
    if (log_stats_) log_stats();
  }
  log_->debug("store server on port {}: stopped with {} connections after {} requests", owner_->port_,
              conns_.size(), owner_->requests_.load());
}

// One line per kStatsLogInterval: the running count, so a reader takes the rate over any span.
void TCPStoreServer::Loop::log_stats() {
  const auto now = Clock::now();
  if (now < next_stats_) return;
  next_stats_ = now + kStatsLogInterval;
  log_->debug(
      "store server on port {}: stats: uptime_s={:.3f} requests={} bytes_in={} bytes_out={} connections={}",
      owner_->port_, std::chrono::duration<double>(now - started_).count(), owner_->requests_.load(),
      owner_->bytes_in_.load(), owner_->bytes_out_.load(), owner_->num_connections_.load());
}

void TCPStoreServer::Loop::accept_all() {
  while (!listener_paused_) {
    int fd = ::accept4(listener_.get(), nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (fd < 0) {
      if (errno == EINTR || errno == ECONNABORTED) continue;
      if (errno == EAGAIN || errno == EWOULDBLOCK) return;
      if (errno == EMFILE || errno == ENFILE || errno == ENOBUFS || errno == ENOMEM) {
        // Out of descriptors: a stranger's descriptor goes first, to a client that may be real.
        if (evict_oldest_stranger("out of descriptors")) continue;
        // Else stop accepting for a moment instead of spinning on the listener.
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
    c->handshake = std::make_unique<proto::ServerHandshake>(token_);
    net::set_nodelay(fd);
    c->events = EPOLLIN;
    add_fd(fd, c->id, c->events);
    if (unauthenticated_ >= max_unauthenticated_)
      evict_oldest_stranger("too many connections in their handshake");
    strangers_.emplace_back(c->id, Clock::now() + handshake_timeout_);
    ++unauthenticated_;
    owner_->num_unauthenticated_.store(unauthenticated_);
    conns_.emplace(c->id, std::move(c));
    owner_->num_connections_.store(conns_.size());
  }
}

// Closes the connection that has been in its handshake longest; false when there is none.
bool TCPStoreServer::Loop::evict_oldest_stranger(const char* why) {
  while (!strangers_.empty()) {
    uint64_t id = strangers_.front().first;
    strangers_.pop_front();
    auto it = conns_.find(id);
    if (it == conns_.end() || it->second->authed) continue;
    close_conn(id, detail::str("dropped before finishing its handshake (", why, ")"), false);
    return true;
  }
  return false;
}

// Closes the connections whose handshake deadline passed (all share one timeout: oldest first).
void TCPStoreServer::Loop::expire_handshakes() {
  const auto now = Clock::now();
  while (!strangers_.empty()) {
    auto [id, deadline] = strangers_.front();
    auto it = conns_.find(id);
    if (it != conns_.end() && !it->second->authed) {
      if (deadline > now) return;
      close_conn(id, "no handshake within the handshake timeout", false);
    }
    strangers_.pop_front();
  }
}

int TCPStoreServer::Loop::next_timeout_ms() const {
  Millis wait{-1};
  if (listener_paused_) wait = kAcceptPause;
  if (log_stats_) {
    auto until = std::max(Millis(0), std::chrono::ceil<Millis>(next_stats_ - Clock::now()));
    wait = wait.count() < 0 ? until : std::min(wait, until);
  }
  if (!strangers_.empty()) {
    auto until = std::chrono::ceil<Millis>(strangers_.front().second - Clock::now());
    until = std::max(Millis(0), until);
    wait = wait.count() < 0 ? until : std::min(wait, until);
  }
  return static_cast<int>(wait.count());
}

// Keeps the buffered-bytes figure of the stats current for one connection.
void TCPStoreServer::Loop::account(Conn& c) {
  size_t now = c.in.capacity() + c.out.capacity();
  if (now >= c.accounted) {
    owner_->buffered_bytes_.fetch_add(now - c.accounted);
  } else {
    owner_->buffered_bytes_.fetch_sub(c.accounted - now);
  }
  c.accounted = now;
}

void TCPStoreServer::Loop::on_event(Conn& c, uint32_t events) {
  uint64_t id = c.id;
  if (events & EPOLLOUT) {
    if (!flush(c)) return close_conn(id, "send failed", false);
  }
  if (events & (EPOLLIN | EPOLLHUP | EPOLLERR)) {
    if (!read_some(c)) {
      bool mid_request = c.in.size() > c.in_pos;
      return close_conn(id, mid_request ? "client vanished mid-request" : "client disconnected", mid_request);
    }
  }
  // Also after EPOLLOUT: frames held back by the high-water mark are processed once it drains,
  // and again as long as flushing makes room (no event would come for input already read).
  size_t handled;
  do {
    handled = process_input(c);
    if (!flush(c)) return close_conn(id, "send failed", false);
  } while (handled > 0 && c.out_pending() < kOutHighWater && !c.close_after_flush);
  update_interest(c);
  account(c);
}

// Reads what is available, at most kReadBudget per event so one fast sender cannot starve the
// others (level-triggered epoll calls again); false when the peer closed or the socket failed.
// Before authentication it reads only up to one handshake frame; the buffer grows only by what
// arrived (reads land in the loop's one scratch buffer first).
bool TCPStoreServer::Loop::read_some(Conn& c) {
  for (size_t budget = kReadBudget; budget > 0; budget -= std::min(budget, kReadChunk)) {
    if (c.in_pos > 0 && c.in_pos == c.in.size()) {
      c.in.clear();
      c.in_pos = 0;
    }
    size_t want = kReadChunk;
    if (!c.authed) {
      size_t held = c.in.size() - c.in_pos;
      if (held >= kPreAuthBuffer) return true;  // process_input refuses what this cannot hold
      want = kPreAuthBuffer - held;
    }
    ssize_t n = ::recv(c.fd.get(), scratch_.data(), want, 0);
    if (n > 0) {
      owner_->bytes_in_.fetch_add(static_cast<uint64_t>(n), std::memory_order_relaxed);
      c.in.insert(c.in.end(), scratch_.data(), scratch_.data() + n);
      if (static_cast<size_t>(n) < want || !c.authed) return true;
      continue;
    }
    if (n == 0) return false;
    if (errno == EINTR) continue;
    return errno == EAGAIN || errno == EWOULDBLOCK;
  }
  return true;
}

// Handles the complete frames buffered, until the replies reach the high-water mark; returns
// how many it handled.
size_t TCPStoreServer::Loop::process_input(Conn& c) {
  size_t handled = 0;
  while (!c.close_after_flush && c.out_pending() < kOutHighWater) {
    size_t avail = c.in.size() - c.in_pos;
    if (avail < proto::kFrameHeaderSize) break;
    uint32_t len = proto::decode_length(c.in.data() + c.in_pos);
    size_t limit = c.authed ? proto::kMaxFrameSize : proto::kMaxHandshakeFrame;
    if (len == 0 || len > limit) {
      DDP_THROW(rdzv::proto::ProtocolError, "frame length ", len, " is outside 1..", limit);
    }
    if (avail < proto::kFrameHeaderSize + len) break;
    const uint8_t* payload = c.in.data() + c.in_pos + proto::kFrameHeaderSize;
    c.in_pos += proto::kFrameHeaderSize + len;
    if (!c.authed) {
      handle_handshake(c, payload, len);
    } else {
      Reader r(payload, len);
      handle_frame(c, r);
    }
    ++handled;
  }
  if (c.in_pos > 0 && c.in_pos == c.in.size()) {
    c.in.clear();
    c.in_pos = 0;
    release_if_large(c.in);
  } else if (c.in_pos > 0 && c.in_pos * 2 >= c.in.size()) {
    c.in.erase(c.in.begin(), c.in.begin() + static_cast<std::ptrdiff_t>(c.in_pos));
    c.in_pos = 0;
  }
  return handled;
}

void TCPStoreServer::Loop::handle_handshake(Conn& c, const uint8_t* payload, size_t size) {
  auto step = c.handshake->on_frame(payload, size);
  send(c, step.reply);
  if (step.outcome == proto::ServerHandshake::Outcome::kRefused) {
    log_->warn("store server: refused client {}: {}", c.peer, step.refusal);
    c.close_after_flush = true;
  } else if (step.outcome == proto::ServerHandshake::Outcome::kAuthenticated) {
    c.authed = true;
    c.handshake.reset();
    --unauthenticated_;
    owner_->num_unauthenticated_.store(unauthenticated_);
  }
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
      owner_->bytes_out_.fetch_add(static_cast<uint64_t>(n), std::memory_order_relaxed);
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
  release_if_large(c.out);
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
    table_.cancel(c.id);
    owner_->num_waiting_.fetch_sub(1);
  }
  if (!c.authed) {
    --unauthenticated_;
    owner_->num_unauthenticated_.store(unauthenticated_);
  }
  owner_->buffered_bytes_.fetch_sub(c.accounted);
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
  loop_ = std::make_unique<Loop>(this, std::move(listener), options);
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
