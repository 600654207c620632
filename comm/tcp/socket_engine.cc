#include "comm/tcp/socket_engine.h"

#include <poll.h>
#include <sched.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <sys/uio.h>

#include <algorithm>
#include <cstring>

#include "comm/tcp/socket_engine_state.h"
#include "common/error.h"
#include "common/log.h"
#include "common/socket.h"

namespace ddp::comm::tcp {
namespace {
constexpr size_t kDiscardChunk = 64 << 10;
constexpr size_t kReadAhead = 8 << 10;
constexpr Millis kByeFlush{500};
constexpr size_t kMaxSendIov = 32;
// While Drivers hold the sockets the progress thread looks again this often (it is not woken
// when the last one leaves with nothing in flight).
constexpr int kDrivenRecheckMs = 10;
}  // namespace

SocketEngine::SocketEngine(Options options, std::vector<Fd> fds, GroupHealth* health)
    : options_(std::move(options)), health_(health) {
  wake_fd_ = Fd(::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC));
  if (!wake_fd_) DDP_THROW_ERRNO("eventfd");
  for (auto r = static_cast<int>(options_.peer_names.size()); r < static_cast<int>(fds.size()); ++r) {
    options_.peer_names.push_back(detail::str("rank ", r));
  }
  for (size_t r = 0; r < fds.size(); ++r) {
    auto peer = std::make_unique<Peer>(name_of(static_cast<int>(r)), options_.max_unexpected_bytes);
    if (fds[r]) {
      net::set_nonblocking(fds[r].get());
      if (options_.notsent_lowat > 0) net::set_notsent_lowat(fds[r].get(), options_.notsent_lowat);
      peer->alive = true;
    }
    peer->fd = std::move(fds[r]);
    peers_.push_back(std::move(peer));
  }
  thread_ = std::thread([this] { loop(); });
}

SocketEngine::~SocketEngine() { shutdown(); }

void SocketEngine::shutdown() noexcept {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (stop_) return;
    for (auto& peer : peers_) {
      if (!peer->alive) continue;
      SendOp bye;
      bye.hdr.channel = static_cast<uint8_t>(Channel::kBye);
      peer->sendq.push_back(std::move(bye));
    }
  }
  wake();
  // Flush what is queued (the goodbyes last), bounded: a stuck peer must not hold us.
  const auto until = Clock::now() + kByeFlush;
  while (Clock::now() < until) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      bool empty = true;
      for (auto& peer : peers_) empty = empty && (!peer->alive || peer->sendq.empty());
      if (empty) break;
    }
    std::this_thread::sleep_for(Millis(1));
  }
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  wake();
  if (thread_.joinable()) thread_.join();
  Done done;
  {
    std::lock_guard<std::mutex> lock(mu_);
    fail_all(done, detail::str("the group '", options_.group, "' was destroyed"));
  }
  finish_all(done);
}

SocketEngine::Hold::Hold(SocketEngine& engine) : engine_(engine) {
  std::lock_guard<std::mutex> lock(engine_.mu_);
  ++engine_.held_;
}

SocketEngine::Hold::~Hold() {
  {
    std::lock_guard<std::mutex> lock(engine_.mu_);
    --engine_.held_;
  }
  engine_.wake_unless_driven();
}

void SocketEngine::wake() {
  uint64_t one = 1;
  [[maybe_unused]] ssize_t n = ::write(wake_fd_.get(), &one, sizeof(one));
}

// A post under a Driver is the Driver's to write; Driver::release wakes the progress thread if
// it is still in flight then (it checks under mu_ after leaving, so no post is missed).
void SocketEngine::wake_unless_driven() {
  if (drivers_.load() == 0) wake();
}

bool SocketEngine::in_flight() const {
  const auto never = Clock::time_point::max();
  if (!any_.empty()) return true;
  for (const auto& peer : peers_) {
    if (!peer->sendq.empty() || peer->mailbox.next_deadline(never) != never) return true;
  }
  return false;
}

SocketEngine::Driver::Driver(SocketEngine& engine) : engine_(&engine) { engine.drivers_.fetch_add(1); }

void SocketEngine::Driver::release() noexcept {
  if (engine_ == nullptr) return;
  SocketEngine& e = *engine_;
  engine_ = nullptr;
  if (e.drivers_.fetch_sub(1) != 1) return;
  bool wake = false;
  {
    std::lock_guard<std::mutex> lock(e.mu_);
    wake = e.in_flight();
  }
  if (wake) e.wake();
}

bool SocketEngine::Driver::drive(Work& work, Clock::time_point until) {
  if (engine_ == nullptr) return work.is_completed();
  SocketEngine& e = *engine_;
  Done done;
  std::vector<pollfd> fds;
  std::vector<int> ranks;
  while (!work.is_completed()) {
    if (Clock::now() >= until) return false;
    bool moved = false;
    if (std::unique_lock<std::mutex> io(e.io_mu_, std::try_to_lock); io) {
      {
        std::lock_guard<std::mutex> lock(e.mu_);
        if (e.stop_) return work.is_completed();
        e.gather(false, fds, ranks);
      }
      const int rc = ::poll(fds.data(), fds.size(), 0);
      moved = rc > 0;
      if (moved) e.move_bytes(fds, ranks, 0, done);
      std::lock_guard<std::mutex> lock(e.mu_);
      e.expire(done);
    }
    finish_all(done);
    if (!moved) sched_yield();
  }
  return true;
}

void SocketEngine::gather(bool wake_fd, std::vector<pollfd>& fds, std::vector<int>& ranks) const {
  fds.clear();
  ranks.clear();
  if (wake_fd) {
    fds.push_back({wake_fd_.get(), POLLIN, 0});
    ranks.push_back(-1);
  }
  for (size_t r = 0; r < peers_.size(); ++r) {
    const Peer& peer = *peers_[r];
    if (!peer.alive) continue;
    short ev = POLLIN;
    if (!peer.sendq.empty() && held_ == 0) ev |= POLLOUT;
    fds.push_back({peer.fd.get(), ev, 0});
    ranks.push_back(static_cast<int>(r));
  }
}

void SocketEngine::move_bytes(const std::vector<pollfd>& fds, const std::vector<int>& ranks, size_t first,
                              Done& done) {
  for (size_t i = first; i < fds.size(); ++i) {
    if (fds[i].revents & (POLLIN | POLLHUP | POLLERR)) on_readable(ranks[i], done);
    if (fds[i].revents & POLLOUT) on_writable(ranks[i], done);
  }
}

void SocketEngine::finish_all(Done& done) {
  for (auto& [work, err] : done) {
    if (work) work->finish(err);
  }
  done.clear();
}

void SocketEngine::send(int p, Channel ch, int64_t tag, const void* data, size_t bytes,
                        const Deadline& deadline, const WorkPtr& work, std::string label) {
  std::exception_ptr err;
  {
    std::lock_guard<std::mutex> lock(mu_);
    Peer& peer = *peers_.at(p);
    if (health_->broken()) {
      try {
        health_->rethrow(label);
      } catch (...) {
        err = std::current_exception();
      }
    } else if (!peer.alive || stop_ || peer.said_bye) {
      err = engine_error<NetworkError>(
          detail::str(label, ": no connection to ", name_of(p), peer.said_bye ? " (it left the group)" : ""));
    } else {
      SendOp op;
      op.hdr.channel = static_cast<uint8_t>(ch);
      op.hdr.tag = tag;
      op.hdr.bytes = bytes;
      op.data = static_cast<const char*>(data);
      op.bytes = bytes;
      op.deadline = deadline.end();
      op.work = work;
      op.label = std::move(label);
      peer.sendq.push_back(std::move(op));
    }
  }
  if (err) {
    work->finish(err);
    return;
  }
  wake_unless_driven();
}

void SocketEngine::recv(int p, Channel ch, int64_t tag, void* data, size_t bytes, const Deadline& deadline,
                        const WorkPtr& work, std::string label) {
  Done done;
  bool queued = false;
  {
    std::lock_guard<std::mutex> lock(mu_);
    Peer& peer = *peers_.at(p);
    const MailKey key{static_cast<uint8_t>(ch), tag};
    std::exception_ptr err;
    if (peer.mailbox.has_unexpected(key)) {
      // Data that arrived before a failure still matches.
    } else if (health_->broken()) {
      try {
        health_->rethrow(label);
      } catch (...) {
        err = std::current_exception();
      }
    } else if (!peer.alive || stop_) {
      err = engine_error<NetworkError>(
          detail::str(label, ": no connection to ", name_of(p), peer.said_bye ? " (it left the group)" : ""));
    }
    if (err) {
      done.emplace_back(work, err);
    } else {
      RecvOp op{static_cast<char*>(data), bytes, deadline.end(), work, std::move(label)};
      queued = peer.mailbox.post(key, std::move(op), done) == Mailbox::Posted::kQueued;
    }
  }
  finish_all(done);
  if (queued) wake_unless_driven();
}

void SocketEngine::recv_any(Channel ch, int64_t tag, void* data, size_t bytes, const Deadline& deadline,
                            const WorkPtr& work, std::string label, std::shared_ptr<int> source) {
  Done done;
  bool queued = false;
  {
    std::lock_guard<std::mutex> lock(mu_);
    const MailKey key{static_cast<uint8_t>(ch), tag};
    RecvOp op{static_cast<char*>(data), bytes, deadline.end(), work, std::move(label)};
    int from = -1;  // the lowest peer holding a message for the key that no recv of its own takes
    bool anyone = false;
    for (size_t r = 0; r < peers_.size() && from < 0; ++r) {
      const Peer& peer = *peers_[r];
      if (peer.mailbox.has_unexpected(key) && !peer.mailbox.has_posted(key)) from = static_cast<int>(r);
      anyone = anyone || (peer.alive && !peer.said_bye);
    }
    if (from >= 0) {
      *source = from;
      peers_[static_cast<size_t>(from)]->mailbox.post(key, std::move(op), done);
    } else if (health_->broken()) {
      try {
        health_->rethrow(op.label);
      } catch (...) {
        done.emplace_back(work, std::current_exception());
      }
    } else if (!anyone || stop_) {
      done.emplace_back(work,
                        engine_error<NetworkError>(detail::str(op.label, ": no peer left to receive from")));
    } else {
      any_.push_back(AnyRecv{key, std::move(op), std::move(source)});
      queued = true;
    }
  }
  finish_all(done);
  if (queued) wake_unless_driven();
}

int SocketEngine::next_timeout_ms() {
  auto next = Clock::now() + Millis(1000);
  for (const auto& a : any_) next = std::min(next, a.op.deadline);
  for (auto& peer : peers_) {
    for (auto& op : peer->sendq) {
      if (op.work) next = std::min(next, op.deadline);
    }
    next = peer->mailbox.next_deadline(next);
  }
  auto ms = std::chrono::duration_cast<Millis>(next - Clock::now()).count() + 1;
  return static_cast<int>(std::clamp<int64_t>(ms, 0, 1000));
}

// The thread's top: nothing escapes it (an exception would terminate the process).
void SocketEngine::loop() noexcept {
  Done done;
  try {
    run_loop(done);
    finish_all(done);
  } catch (const std::exception& e) {
    fail_engine(done, e.what());
  } catch (...) {
    fail_engine(done, "unknown exception");
  }
}

// Whether the next poll(2) should not sleep (Options::blocked, Options::poll).
bool SocketEngine::polling(Clock::time_point last_moved) const {
  const auto* blocked = options_.blocked;
  return blocked != nullptr && options_.poll.count() > 0 && blocked->load(std::memory_order_relaxed) > 0 &&
         Clock::now() < last_moved + options_.poll;
}

void SocketEngine::run_loop(Done& done) {
  std::vector<pollfd> fds;
  std::vector<int> ranks;
  Clock::time_point last_moved = Clock::now();
  while (true) {
    // Driven (Driver): only the wake fd, and back soon to see whether the drivers left.
    const bool driven = drivers_.load() > 0;
    int timeout = 0;
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (stop_) return;
      gather(true, fds, ranks);
      if (driven) fds.resize(1);
      timeout = next_timeout_ms();
      if (driven) timeout = std::min(timeout, kDrivenRecheckMs);
    }
    const bool hot = !driven && polling(last_moved);
    int rc = ::poll(fds.data(), fds.size(), hot ? 0 : timeout);
    if (rc > 0) last_moved = Clock::now();
    if (rc == 0 && hot) sched_yield();
    if (rc < 0 && errno != EINTR) {
      std::lock_guard<std::mutex> lock(mu_);
      health_->fail(FailureKind::kOther, -1, detail::str("poll failed: ", std::strerror(errno)));
      fail_all(done, "the progress engine failed");
      return;
    }
    if (fds[0].revents & POLLIN) {
      uint64_t v;
      [[maybe_unused]] ssize_t n = ::read(wake_fd_.get(), &v, sizeof(v));
    }
    if (rc > 0 && fds.size() > 1) {
      std::lock_guard<std::mutex> io(io_mu_);
      move_bytes(fds, ranks, 1, done);
    }
    {
      // io_mu_ first: a Driver's sendmsg may be reading the messages these end (their headers
      // live in the queue).
      std::lock_guard<std::mutex> io(io_mu_);
      std::lock_guard<std::mutex> lock(mu_);
      expire(done);
      follow_health(done);
    }
    finish_all(done);
  }
}

void SocketEngine::on_readable(int p, Done& done) {
  Peer& peer = *peers_[p];
  while (peer.alive) {
    bool progressed = peer.mailbox.receiving() ? read_payload(p, done) : read_header(p, done);
    if (!progressed) return;
  }
}

ssize_t SocketEngine::pull(Peer& peer, char* dst, size_t want, bool& drained) {
  drained = false;
  if (peer.ahead_pos < peer.ahead_len) {
    const size_t n = std::min(want, peer.ahead_len - peer.ahead_pos);
    std::memcpy(dst, peer.ahead.data() + peer.ahead_pos, n);
    peer.ahead_pos += n;
    // The last of what a draining read brought: reading again now would only say EAGAIN (a
    // system call per small message).
    drained = peer.ahead_drained && peer.ahead_pos == peer.ahead_len;
    return static_cast<ssize_t>(n);
  }
  if (want >= kReadAhead) {
    const ssize_t n = ::recv(peer.fd.get(), dst, want, MSG_DONTWAIT);
    drained = n >= 0 && static_cast<size_t>(n) < want;
    return n;
  }
  peer.ahead.resize(kReadAhead);
  iovec iov[2] = {{dst, want}, {peer.ahead.data(), kReadAhead}};
  msghdr msg{};
  msg.msg_iov = iov;
  msg.msg_iovlen = 2;
  const ssize_t n = ::recvmsg(peer.fd.get(), &msg, MSG_DONTWAIT);
  if (n <= 0) return n;
  const auto got = static_cast<size_t>(n);
  drained = got < want + kReadAhead;
  peer.ahead_drained = drained;
  peer.ahead_pos = 0;
  peer.ahead_len = got > want ? got - want : 0;
  return static_cast<ssize_t>(std::min(got, want));
}

bool SocketEngine::more_to_read(const Peer& peer, bool drained) {
  return !drained || peer.ahead_pos < peer.ahead_len;
}

// Returns false when the socket has nothing more now (or the peer was lost).
bool SocketEngine::read_header(int p, Done& done) {
  Peer& peer = *peers_[p];
  auto* dst = reinterpret_cast<char*>(&peer.hdr) + peer.hdr_got;
  bool drained = false;
  ssize_t n = pull(peer, dst, sizeof(WireHeader) - peer.hdr_got, drained);
  if (n == 0 && peer.hdr_got == 0 && peer.said_bye) {
    std::lock_guard<std::mutex> lock(mu_);
    close_peer(p, done);
    return false;
  }
  if (n == 0 || (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)) {
    std::lock_guard<std::mutex> lock(mu_);
    lose_peer(p, n == 0 ? "connection closed (process exited or crashed)" : std::strerror(errno), done);
    return false;
  }
  if (n < 0) return errno == EINTR;
  peer.hdr_got += static_cast<size_t>(n);
  if (peer.hdr_got < sizeof(WireHeader)) return more_to_read(peer, drained);
  peer.hdr_got = 0;
  std::lock_guard<std::mutex> lock(mu_);
  if (std::string bad = check_header(peer.hdr); !bad.empty()) {
    lose_peer(p, "malformed message header (protocol error: " + bad + ")", done);
    return false;
  }
  if (peer.hdr.channel == static_cast<uint8_t>(Channel::kBye)) {
    peer.said_bye = true;
    health_->mark_departed(p);
    return true;
  }
  const MailKey key{peer.hdr.channel, peer.hdr.tag};
  if (!any_.empty()) claim_for_any(p, key);
  if (std::string why = peer.mailbox.arrive(key, peer.hdr.bytes, done); !why.empty()) {
    lose_peer(p, why, done);
    return false;
  }
  return more_to_read(peer, drained);
}

bool SocketEngine::read_payload(int p, Done& done) {
  Peer& peer = *peers_[p];
  static thread_local std::vector<char> scratch(kDiscardChunk);
  Mailbox::Target target = peer.mailbox.payload_target(kDiscardChunk);
  char* dst = target.data != nullptr ? target.data : scratch.data();
  bool drained = false;
  ssize_t n = pull(peer, dst, target.room, drained);
  if (n == 0 || (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)) {
    std::lock_guard<std::mutex> lock(mu_);
    lose_peer(p, n == 0 ? "connection closed (process exited or crashed)" : std::strerror(errno), done);
    return false;
  }
  if (n < 0) return errno == EINTR;
  const bool more = more_to_read(peer, drained);
  if (!peer.mailbox.received(static_cast<size_t>(n))) return more;
  std::lock_guard<std::mutex> lock(mu_);
  peer.mailbox.complete(done);
  return more;
}

// Writes as many queued messages as one sendmsg takes (up to kMaxSendIov pieces): messages
// queued together (an op's fingerprint and data, a chunk to each step) leave in one system call
// and, when small, one TCP segment.
void SocketEngine::on_writable(int p, Done& done) {
  Peer& peer = *peers_[p];
  while (true) {
    iovec iov[kMaxSendIov];
    size_t cnt = 0;
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (peer.sendq.empty() || !peer.alive) return;
      for (SendOp& op : peer.sendq) {
        if (cnt + 2 > kMaxSendIov) break;
        if (op.sent < sizeof(WireHeader)) {
          iov[cnt++] = {reinterpret_cast<char*>(&op.hdr) + op.sent, sizeof(WireHeader) - op.sent};
          if (op.bytes) iov[cnt++] = {const_cast<char*>(op.data), op.bytes};
        } else {
          size_t off = op.sent - sizeof(WireHeader);
          iov[cnt++] = {const_cast<char*>(op.data) + off, op.bytes - off};
        }
      }
    }
    msghdr msg{};
    msg.msg_iov = iov;
    msg.msg_iovlen = cnt;
    ssize_t n = ::sendmsg(peer.fd.get(), &msg, MSG_NOSIGNAL | MSG_DONTWAIT);
    std::lock_guard<std::mutex> lock(mu_);
    if (n < 0) {
      if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR) return;
      lose_peer(p, std::strerror(errno), done);
      return;
    }
    // The bytes written finish the queue's messages in order; the last may be partly written.
    auto left = static_cast<size_t>(n);
    while (!peer.sendq.empty()) {
      SendOp& op = peer.sendq.front();
      const size_t take = std::min(left, sizeof(WireHeader) + op.bytes - op.sent);
      op.sent += take;
      left -= take;
      if (op.sent < sizeof(WireHeader) + op.bytes) break;
      if (op.work) done.emplace_back(op.work, nullptr);
      peer.sendq.pop_front();
    }
  }
}

}  // namespace ddp::comm::tcp
