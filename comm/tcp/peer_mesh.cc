#include "comm/tcp/peer_mesh.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <memory>
#include <sstream>

#include "common/error.h"
#include "common/host_addresses.h"
#include "common/log.h"
#include "common/socket.h"

namespace ddp::comm::tcp {
namespace {

constexpr Millis kConnectAttempt{3'000};

Fd connect_peer(const PeerAddress& peer, bool same_host, const Deadline& deadline, int rank) {
  std::vector<std::string> candidates = peer.addrs;
  if (same_host) {
    std::stable_partition(candidates.begin(), candidates.end(),
                          [](const std::string& a) { return a == "::1" || a.rfind("127.", 0) == 0; });
  }
  std::string errors;
  while (true) {
    for (const auto& host : candidates) {
      try {
        return net::connect_tcp({host, peer.port}, Deadline(std::min(deadline.remaining(), kConnectAttempt)));
      } catch (const Error& e) {
        errors = e.message();
      }
      if (deadline.expired()) break;
    }
    if (deadline.expired()) {
      DDP_THROW(TimeoutError, "tcp backend: could not connect to rank ", rank, " (", peer.host, ":",
                peer.port, "): ", errors);
    }
  }
}

// One accepted connection whose handshake is under way.
struct Pending {
  Fd fd;
  AcceptorHandshake handshake;
  std::string out;  // bytes still to send
  Clock::time_point deadline;
};

// Sends what the socket takes now; false when the connection broke.
bool flush(Pending& p) {
  while (!p.out.empty()) {
    ssize_t n = ::send(p.fd.get(), p.out.data(), p.out.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return errno == EAGAIN || errno == EWOULDBLOCK;
    p.out.erase(0, static_cast<size_t>(n));
  }
  return true;
}

// Reads what the handshake wants and answers; false when the connection closed or broke.
bool advance(Pending& p) {
  uint8_t buf[256];
  while (size_t want = std::min(p.handshake.wanted(), sizeof(buf))) {
    ssize_t n = ::recv(p.fd.get(), buf, want, MSG_DONTWAIT);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) break;
    if (n <= 0) return false;
    p.out += p.handshake.feed(buf, static_cast<size_t>(n));
  }
  return flush(p);
}

[[noreturn]] void throw_missing(const MeshOptions& o, const std::vector<bool>& have) {
  std::string list;
  for (int r = o.rank + 1; r < o.size; ++r) {
    if (!have[r]) list += (list.empty() ? "" : ", ") + std::to_string(r);
  }
  DDP_THROW(TimeoutError, "tcp backend: group '", o.group, "' rank ", o.rank, ": ranks [", list,
            "] did not connect within the setup timeout");
}

// The acceptor's side of the mesh: every pending handshake is served at once, so a silent or
// slow stranger holds only its own slot (kTcpHandshakeTimeout, at most kMaxPendingHandshakes).
class Acceptor {
 public:
  Acceptor(int listener, const MeshOptions& o, std::vector<Fd>& fds)
      : listener_(listener), o_(o), fds_(fds), have_(o.size, false), missing_(o.size - 1 - o.rank) {}

  void run(const Deadline& deadline) {
    while (missing_ > 0) {
      if (deadline.expired()) throw_missing(o_, have_);
      int rc = poll_once(deadline);
      // Handshakes first, newest last (indices match `polled_` until the vector changes).
      for (size_t i = pending_.size(); rc > 0 && i-- > 0;) {
        if (polled_[i + 1].revents) step(i);
      }
      const auto now = Clock::now();
      for (size_t i = pending_.size(); i-- > 0;) {
        if (pending_[i]->deadline <= now) drop(i, "no handshake within the handshake timeout");
      }
      if (rc > 0 && (polled_[0].revents & POLLIN)) accept_new();
    }
  }

 private:
  int poll_once(const Deadline& deadline) {
    polled_.assign(1, pollfd{listener_, POLLIN, 0});
    auto wake = deadline.end();
    for (auto& p : pending_) {
      polled_.push_back({p->fd.get(), static_cast<short>(p->out.empty() ? POLLIN : POLLIN | POLLOUT), 0});
      wake = std::min(wake, p->deadline);
    }
    const auto ms = std::clamp<int64_t>(std::chrono::ceil<Millis>(wake - Clock::now()).count(), 0, 500);
    int rc = ::poll(polled_.data(), polled_.size(), static_cast<int>(ms));
    if (rc < 0 && errno != EINTR) DDP_THROW_ERRNO("poll(listener)");
    return rc;
  }

  // Moves one pending connection on: reads, answers, and settles it once its verdict is out.
  void step(size_t i) {
    Pending& p = *pending_[i];
    try {
      if (!advance(p)) return drop(i, "closed during the handshake");
    } catch (const Error& e) {
      return drop(i, e.message());
    }
    using State = AcceptorHandshake::State;
    const int rank = p.handshake.peer_rank();
    if (p.handshake.state() == State::kAccepted) have_[rank] = true;  // a second claim is refused
    if (!p.out.empty()) return;                                       // the verdict is still on its way
    if (p.handshake.state() == State::kRefused) {
      drop(i, detail::str("refused rank ", rank, ": ", p.handshake.refusal()));
    } else if (p.handshake.state() == State::kAccepted) {
      net::set_nonblocking(p.fd.get(), false);
      fds_[rank] = std::move(p.fd);
      pending_.erase(pending_.begin() + static_cast<std::ptrdiff_t>(i));
      --missing_;
    }
  }

  void accept_new() {
    while (true) {
      Fd fd(::accept4(listener_, nullptr, nullptr, SOCK_CLOEXEC | SOCK_NONBLOCK));
      if (!fd) return;
      if (pending_.size() >= kMaxPendingHandshakes) drop(0, "too many connections in their handshake");
      pending_.push_back(std::make_unique<Pending>(
          Pending{std::move(fd), AcceptorHandshake(o_, &have_), {}, Clock::now() + kTcpHandshakeTimeout}));
    }
  }

  void drop(size_t i, const std::string& why) {
    const auto& h = pending_[i]->handshake;
    if (h.state() == AcceptorHandshake::State::kAccepted)
      have_[h.peer_rank()] = false;  // its verdict was lost
    logger("tcp")->warn("tcp backend: dropped a connection on group '{}': {}", o_.group, why);
    pending_.erase(pending_.begin() + static_cast<std::ptrdiff_t>(i));
  }

  int listener_;
  const MeshOptions& o_;
  std::vector<Fd>& fds_;
  std::vector<bool> have_;
  int missing_;
  std::vector<std::unique_ptr<Pending>> pending_;
  std::vector<pollfd> polled_;
};

}  // namespace

std::string PeerAddress::encode() const {
  std::ostringstream os;
  os << port << '\n' << boot_id << '\n' << pid << '\n' << host << '\n';
  for (size_t i = 0; i < addrs.size(); ++i) os << (i ? "," : "") << addrs[i];
  return os.str();
}

PeerAddress PeerAddress::decode(const std::string& text) {
  std::istringstream is(text);
  PeerAddress a;
  std::string port, pid, list;
  if (!std::getline(is, port) || !std::getline(is, a.boot_id) || !std::getline(is, pid) ||
      !std::getline(is, a.host) || !std::getline(is, list)) {
    DDP_THROW(InvalidArgument, "tcp backend: malformed peer address '", text, "'");
  }
  try {
    a.port = static_cast<uint16_t>(std::stoul(port));
    a.pid = std::stoll(pid);
  } catch (const std::exception&) {
    DDP_THROW(InvalidArgument, "tcp backend: malformed peer address '", text, "'");
  }
  std::istringstream ls(list);
  for (std::string item; std::getline(ls, item, ',');) {
    if (!item.empty()) a.addrs.push_back(item);
  }
  return a;
}

PeerAddress PeerAddress::local(uint16_t port) {
  PeerAddress a;
  a.port = port;
  a.boot_id = net::same_host_key();  // boot id + IPC and net namespaces: containers on one host use sockets
  a.pid = ::getpid();
  a.host = net::hostname();
  a.addrs = net::local_addresses("");  // interfaces that are up, loopback last; never empty
  return a;
}

Mesh build_mesh(rdzv::Store& store, const MeshOptions& o, const Deadline& deadline) {
  Mesh mesh;
  mesh.fds.resize(o.size);
  mesh.peers.resize(o.size);
  Fd listener = net::listen_tcp({});
  net::set_nonblocking(listener.get());
  mesh.peers[o.rank] = PeerAddress::local(net::local_port(listener.get()));
  store.set("tcp/addr/" + std::to_string(o.rank), mesh.peers[o.rank].encode());
  for (int r = 0; r < o.size; ++r) {
    if (r == o.rank) continue;
    mesh.peers[r] =
        PeerAddress::decode(store.get_string("tcp/addr/" + std::to_string(r), deadline.remaining()));
  }
  for (int r = 0; r < o.rank; ++r) {
    const bool same_host = mesh.peers[r].boot_id == mesh.peers[o.rank].boot_id;
    Fd fd = connect_peer(mesh.peers[r], same_host, deadline, r);
    connect_handshake(fd.get(), o, r, deadline);
    mesh.fds[r] = std::move(fd);
  }
  Acceptor(listener.get(), o, mesh.fds).run(deadline);
  for (int r = 0; r < o.size; ++r) {
    if (r == o.rank) continue;
    net::set_nodelay(mesh.fds[r].get());
    if (mesh.peers[r].boot_id != mesh.peers[o.rank].boot_id) net::set_keepalive(mesh.fds[r].get());
  }
  return mesh;
}

}  // namespace ddp::comm::tcp
