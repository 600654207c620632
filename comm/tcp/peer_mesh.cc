#include "comm/tcp/peer_mesh.h"

#include <arpa/inet.h>
#include <ifaddrs.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <sstream>

#include "common/error.h"
#include "common/log.h"
#include "common/socket.h"

namespace ddp::comm::tcp {
namespace {

constexpr char kHelloMagic[8] = {'D', 'D', 'P', 'T', 'C', 'P', '0', '1'};
constexpr uint32_t kMaxField = 4096;
constexpr Millis kHandshakeTimeout{10'000};
constexpr Millis kConnectAttempt{3'000};

std::vector<std::string> interface_addresses() {
  std::vector<std::string> out, loop;
  ifaddrs* ifa = nullptr;
  if (::getifaddrs(&ifa) != 0) return {"127.0.0.1"};
  for (ifaddrs* i = ifa; i; i = i->ifa_next) {
    if (!i->ifa_addr) continue;
    char buf[INET6_ADDRSTRLEN] = {};
    if (i->ifa_addr->sa_family == AF_INET) {
      ::inet_ntop(AF_INET, &reinterpret_cast<sockaddr_in*>(i->ifa_addr)->sin_addr, buf, sizeof(buf));
    } else if (i->ifa_addr->sa_family == AF_INET6) {
      auto* a6 = reinterpret_cast<sockaddr_in6*>(i->ifa_addr);
      if (IN6_IS_ADDR_LINKLOCAL(&a6->sin6_addr)) continue;  // needs a scope id: not portable
      ::inet_ntop(AF_INET6, &a6->sin6_addr, buf, sizeof(buf));
    } else {
      continue;
    }
    std::string s(buf);
    bool loopback = s == "::1" || s.rfind("127.", 0) == 0;
    (loopback ? loop : out).push_back(s);
  }
  ::freeifaddrs(ifa);
  out.insert(out.end(), loop.begin(), loop.end());
  if (out.empty()) out.push_back("127.0.0.1");
  return out;
}

void put_u32(std::string& out, uint32_t v) { out.append(reinterpret_cast<const char*>(&v), 4); }

uint32_t get_u32(int fd, const Deadline& d, const std::string& what) {
  uint32_t v = 0;
  net::recv_all(fd, &v, 4, d, what);
  return v;
}

std::string get_field(int fd, const Deadline& d, const std::string& what) {
  uint32_t n = get_u32(fd, d, what);
  if (n > kMaxField) DDP_THROW(InvalidArgument, what, ": field of ", n, " bytes exceeds ", kMaxField);
  std::string s(n, '\0');
  if (n) net::recv_all(fd, s.data(), n, d, what);
  return s;
}

bool equal_ct(const std::string& a, const std::string& b) {  // constant time in the content
  if (a.size() != b.size()) return false;
  unsigned char diff = 0;
  for (size_t i = 0; i < a.size(); ++i) diff |= static_cast<unsigned char>(a[i] ^ b[i]);
  return diff == 0;
}

// Client side: hello, then the acceptor's verdict.
void client_handshake(int fd, const MeshOptions& o, int peer, const Deadline& deadline) {
  std::string hello(kHelloMagic, sizeof(kHelloMagic));
  put_u32(hello, static_cast<uint32_t>(o.rank));
  put_u32(hello, static_cast<uint32_t>(o.size));
  put_u32(hello, static_cast<uint32_t>(o.job_token.size()));
  hello += o.job_token;
  put_u32(hello, static_cast<uint32_t>(o.group.size()));
  hello += o.group;
  const std::string what = detail::str("tcp backend: handshake with rank ", peer, " of group '", o.group, "'");
  Deadline d(std::min(deadline.remaining(), kHandshakeTimeout));
  net::send_all(fd, hello.data(), hello.size(), d, what);
  uint32_t status = get_u32(fd, d, what);
  std::string message = get_field(fd, d, what);
  if (status != 0) DDP_THROW(NetworkError, what, ": rank ", peer, " refused the connection: ", message);
}

// Server side: returns the peer's rank, or -1 after refusing the connection.
int server_handshake(int fd, const MeshOptions& o, const std::vector<bool>& have, const Deadline& deadline) {
  const std::string what = detail::str("tcp backend: handshake on group '", o.group, "'");
  Deadline d(std::min(deadline.remaining(), kHandshakeTimeout));
  char magic[sizeof(kHelloMagic)];
  net::recv_all(fd, magic, sizeof(magic), d, what);
  if (std::memcmp(magic, kHelloMagic, sizeof(magic)) != 0) DDP_THROW(InvalidArgument, what, ": not a ddp tcp hello");
  int rank = static_cast<int>(get_u32(fd, d, what));
  int size = static_cast<int>(get_u32(fd, d, what));
  std::string token = get_field(fd, d, what);
  std::string group = get_field(fd, d, what);
  std::string refusal;
  if (!equal_ct(token, o.job_token)) {
    refusal = "job token does not match";
  } else if (group != o.group || size != o.size) {
    refusal = detail::str("peer belongs to group '", group, "' of size ", size, ", expected '", o.group, "' of size ", o.size);
  } else if (rank <= o.rank || rank >= o.size || have[rank]) {
    refusal = detail::str("unexpected rank ", rank);
  }
  std::string reply;
  put_u32(reply, refusal.empty() ? 0 : 1);
  put_u32(reply, static_cast<uint32_t>(refusal.size()));
  reply += refusal;
  net::send_all(fd, reply.data(), reply.size(), d, what);
  if (!refusal.empty()) {
    logger("tcp")->warn("{}: refused a connection from rank {}: {}", what, rank, refusal);
    return -1;
  }
  return rank;
}

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
      DDP_THROW(TimeoutError, "tcp backend: could not connect to rank ", rank, " (", peer.host, ":", peer.port,
                "): ", errors);
    }
  }
}

void accept_peers(int listener, const MeshOptions& o, std::vector<Fd>& fds, const Deadline& deadline) {
  std::vector<bool> have(o.size, false);
  int missing = o.size - 1 - o.rank;
  while (missing > 0) {
    pollfd p{listener, POLLIN, 0};
    int rc = ::poll(&p, 1, deadline.poll_ms(Millis(500)));
    if (rc < 0 && errno != EINTR) DDP_THROW_ERRNO("poll(listener)");
    if (rc <= 0) {
      if (deadline.expired()) {
        std::string list;
        for (int r = o.rank + 1; r < o.size; ++r) {
          if (!have[r]) list += (list.empty() ? "" : ", ") + std::to_string(r);
        }
        DDP_THROW(TimeoutError, "tcp backend: group '", o.group, "' rank ", o.rank, ": ranks [", list,
                  "] did not connect within the setup timeout");
      }
      continue;
    }
    Fd fd(::accept4(listener, nullptr, nullptr, SOCK_CLOEXEC));
    if (!fd) continue;
    try {
      int peer = server_handshake(fd.get(), o, have, deadline);
      if (peer < 0) continue;
      net::set_nodelay(fd.get());
      have[peer] = true;
      fds[peer] = std::move(fd);
      --missing;
    } catch (const Error& e) {
      logger("tcp")->warn("tcp backend: dropped a bad connection on group '{}': {}", o.group, e.message());
    }
  }
}

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
  a.addrs = interface_addresses();
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
    mesh.peers[r] = PeerAddress::decode(store.get_string("tcp/addr/" + std::to_string(r), deadline.remaining()));
  }
  for (int r = 0; r < o.rank; ++r) {
    const bool same_host = mesh.peers[r].boot_id == mesh.peers[o.rank].boot_id;
    Fd fd = connect_peer(mesh.peers[r], same_host, deadline, r);
    client_handshake(fd.get(), o, r, deadline);
    mesh.fds[r] = std::move(fd);
  }
  accept_peers(listener.get(), o, mesh.fds, deadline);
  for (int r = 0; r < o.size; ++r) {
    if (r == o.rank) continue;
    net::set_nodelay(mesh.fds[r].get());
    if (mesh.peers[r].boot_id != mesh.peers[o.rank].boot_id) net::set_keepalive(mesh.fds[r].get());
  }
  return mesh;
}

}  // namespace ddp::comm::tcp
