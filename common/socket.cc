#include "common/socket.h"

#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <climits>
#include <cstring>
#include <fstream>
#include <random>
#include <thread>

#include "common/auth.h"
#include "common/error.h"
#include "common/timeouts.h"

namespace ddp::net {
namespace {

struct AddrInfo {
  addrinfo* head = nullptr;
  AddrInfo() = default;
  AddrInfo(const AddrInfo&) = delete;
  AddrInfo& operator=(const AddrInfo&) = delete;
  ~AddrInfo() {
    if (head) freeaddrinfo(head);
  }
};

void resolve(const std::string& host, uint16_t port, bool passive, AddrInfo* out) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = passive ? AI_PASSIVE : AI_ADDRCONFIG;
  std::string service = std::to_string(port);
  int rc = getaddrinfo(host.empty() ? nullptr : host.c_str(), service.c_str(), &hints, &out->head);
  if (rc != 0) {
    DDP_THROW(NetworkError, "cannot resolve '", host, "': ", gai_strerror(rc));
  }
}

void wait_fd(int fd, short events, const Deadline& deadline, const std::string& what) {
  while (true) {
    pollfd p{fd, events, 0};
    int rc = ::poll(&p, 1, deadline.poll_ms());
    if (rc > 0) return;
    if (rc == 0) {
      DDP_THROW(TimeoutError, what, ": timed out after ", deadline.elapsed().count(), " ms");
    }
    if (errno != EINTR) DDP_THROW_ERRNO("poll (", what, ")");
  }
}

}  // namespace

std::string Endpoint::str() const {
  if (host.find(':') != std::string::npos) return "[" + host + "]:" + std::to_string(port);
  return host + ":" + std::to_string(port);
}

Endpoint parse_endpoint(const std::string& text, uint16_t default_port) {
  Endpoint ep;
  std::string port_text;
  if (!text.empty() && text[0] == '[') {
    auto close = text.find(']');
    if (close == std::string::npos) DDP_THROW(InvalidArgument, "endpoint '", text, "': missing ']'");
    ep.host = text.substr(1, close - 1);
    if (close + 1 < text.size()) {
      if (text[close + 1] != ':') DDP_THROW(InvalidArgument, "endpoint '", text, "': expected ':' after ']'");
      port_text = text.substr(close + 2);
    }
  } else {
    auto colon = text.rfind(':');
    if (colon != std::string::npos && text.find(':') == colon) {
      ep.host = text.substr(0, colon);
      port_text = text.substr(colon + 1);
    } else {
      ep.host = text;  // a bare host or a bare IPv6 literal
    }
  }
  if (ep.host.empty()) DDP_THROW(InvalidArgument, "endpoint '", text, "': empty host");
  if (port_text.empty()) {
    ep.port = default_port;
  } else {
    char* end = nullptr;
    long port = std::strtol(port_text.c_str(), &end, 10);
    if (*end != '\0' || port < 0 || port > 65535) {
      DDP_THROW(InvalidArgument, "endpoint '", text, "': port '", port_text, "' is not in 0..65535");
    }
    ep.port = static_cast<uint16_t>(port);
  }
  return ep;
}

namespace {

// getaddrinfo(NULL, port, AI_PASSIVE)'s two answers, [::] then 0.0.0.0, without its cost: it
// sorts them (RFC 6724) by asking the kernel for every address and probing routes.
void wildcard(uint16_t port, sockaddr_in6* v6, sockaddr_in* v4, addrinfo out[2]) {
  *v6 = sockaddr_in6{};
  v6->sin6_family = AF_INET6;
  v6->sin6_port = htons(port);
  v6->sin6_addr = in6addr_any;
  *v4 = sockaddr_in{};
  v4->sin_family = AF_INET;
  v4->sin_port = htons(port);
  v4->sin_addr.s_addr = htonl(INADDR_ANY);
  out[0] = addrinfo{};
  out[0].ai_family = AF_INET6;
  out[0].ai_socktype = SOCK_STREAM;
  out[0].ai_protocol = IPPROTO_TCP;
  out[0].ai_addr = reinterpret_cast<sockaddr*>(v6);
  out[0].ai_addrlen = sizeof *v6;
  out[0].ai_next = &out[1];
  out[1] = out[0];
  out[1].ai_family = AF_INET;
  out[1].ai_addr = reinterpret_cast<sockaddr*>(v4);
  out[1].ai_addrlen = sizeof *v4;
  out[1].ai_next = nullptr;
}

}  // namespace

Fd listen_tcp(const ListenOptions& options) {
  AddrInfo ai;
  sockaddr_in6 any6;
  sockaddr_in any4;
  addrinfo any[2];
  if (options.host.empty()) {
    wildcard(options.port, &any6, &any4, any);
  } else {
    resolve(options.host, options.port, true, &ai);
  }
  addrinfo* const head = options.host.empty() ? &any[0] : ai.head;
  // Prefer IPv6 (dual-stack) for the wildcard address so v4 and v6 clients both reach us.
  std::string last_error = "no address";
  for (int pass = 0; pass < 2; ++pass) {
    for (addrinfo* a = head; a; a = a->ai_next) {
      if (options.host.empty() && (pass == 0) != (a->ai_family == AF_INET6)) continue;
      if (!options.host.empty() && pass == 1) continue;
      Fd fd(::socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC, a->ai_protocol));
      if (!fd) continue;
      int one = 1;
      if (options.reuse_addr) ::setsockopt(fd.get(), SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
      if (a->ai_family == AF_INET6) {
        int zero = 0;
        ::setsockopt(fd.get(), IPPROTO_IPV6, IPV6_V6ONLY, &zero, sizeof(zero));
      }
      if (::bind(fd.get(), a->ai_addr, a->ai_addrlen) != 0 || ::listen(fd.get(), options.backlog) != 0) {
        last_error = std::strerror(errno);
        continue;
      }
      return fd;
    }
  }
  DDP_THROW(NetworkError, "cannot listen on ",
            Endpoint{options.host.empty() ? "*" : options.host, options.port}.str(), ": ", last_error);
}

uint16_t local_port(int fd) {
  sockaddr_storage ss{};
  socklen_t len = sizeof(ss);
  if (::getsockname(fd, reinterpret_cast<sockaddr*>(&ss), &len) != 0) DDP_THROW_ERRNO("getsockname");
  if (ss.ss_family == AF_INET6) return ntohs(reinterpret_cast<sockaddr_in6*>(&ss)->sin6_port);
  return ntohs(reinterpret_cast<sockaddr_in*>(&ss)->sin_port);
}

namespace {
std::atomic<uint64_t> g_failed_connects{0};
}  // namespace

uint64_t failed_connect_attempts() { return g_failed_connects.load(); }

Fd connect_tcp(const Endpoint& peer, const Deadline& deadline) {
  std::mt19937 rng(static_cast<uint32_t>(auth::random_u64()));
  Millis backoff(10);
  std::string last_error;
  while (true) {
    try {
      AddrInfo ai;
      resolve(peer.host, peer.port, false, &ai);
      for (addrinfo* a = ai.head; a; a = a->ai_next) {
        Fd fd(::socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC | SOCK_NONBLOCK, a->ai_protocol));
        if (!fd) continue;
        int rc = ::connect(fd.get(), a->ai_addr, a->ai_addrlen);
        if (rc != 0 && errno == EINPROGRESS) {
          pollfd p{fd.get(), POLLOUT, 0};
          rc = ::poll(&p, 1, std::min(deadline.poll_ms(), 5000));
          int err = 0;
          socklen_t len = sizeof(err);
          if (rc > 0) ::getsockopt(fd.get(), SOL_SOCKET, SO_ERROR, &err, &len);
          errno = rc > 0 ? err : ETIMEDOUT;
          rc = (rc > 0 && err == 0) ? 0 : -1;
        }
        if (rc == 0) {
          set_nonblocking(fd.get(), false);
          set_nodelay(fd.get());
          return fd;
        }
        last_error = std::strerror(errno);
        g_failed_connects.fetch_add(1);
      }
    } catch (const NetworkError& e) {
      last_error = e.message();
    }
    if (deadline.expired()) {
      DDP_THROW(TimeoutError, "connect to ", peer.str(), " timed out after ", deadline.elapsed().count(),
                " ms (last error: ", last_error, ")");
    }
    std::uniform_int_distribution<int64_t> jitter(0, backoff.count() / 2);
    auto sleep = std::min(deadline.remaining(), backoff + Millis(jitter(rng)));
    std::this_thread::sleep_for(sleep);
    backoff = std::min(backoff * 2, Millis(1000));
  }
}

void set_nonblocking(int fd, bool on) {
  int flags = ::fcntl(fd, F_GETFL, 0);
  if (flags < 0) DDP_THROW_ERRNO("fcntl(F_GETFL)");
  flags = on ? (flags | O_NONBLOCK) : (flags & ~O_NONBLOCK);
  if (::fcntl(fd, F_SETFL, flags) < 0) DDP_THROW_ERRNO("fcntl(F_SETFL)");
}

void set_nodelay(int fd) {
  int one = 1;
  ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
}

bool set_notsent_lowat(int fd, size_t bytes) {
  const int v = static_cast<int>(std::min<size_t>(bytes, INT_MAX));
  return ::setsockopt(fd, IPPROTO_TCP, TCP_NOTSENT_LOWAT, &v, sizeof(v)) == 0;
}

void set_keepalive(int fd) {
  int one = 1, idle = 1, interval = 1, count = 2;
  ::setsockopt(fd, SOL_SOCKET, SO_KEEPALIVE, &one, sizeof(one));
  ::setsockopt(fd, IPPROTO_TCP, TCP_KEEPIDLE, &idle, sizeof(idle));
  ::setsockopt(fd, IPPROTO_TCP, TCP_KEEPINTVL, &interval, sizeof(interval));
  ::setsockopt(fd, IPPROTO_TCP, TCP_KEEPCNT, &count, sizeof(count));
  // Probes unanswered, or data unacknowledged, for the link-loss bound: give up (with
  // TCP_USER_TIMEOUT set, the kernel ends an idle connection by it too, not by the count).
  auto user_timeout = static_cast<unsigned int>(kLinkLossDetection.count());
  ::setsockopt(fd, IPPROTO_TCP, TCP_USER_TIMEOUT, &user_timeout, sizeof(user_timeout));
}

void send_all(int fd, const void* data, size_t size, const Deadline& deadline, const std::string& what) {
  auto* p = static_cast<const char*>(data);
  while (size > 0) {
    ssize_t n = ::send(fd, p, size, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (n > 0) {
      p += n;
      size -= static_cast<size_t>(n);
    } else if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
      wait_fd(fd, POLLOUT, deadline, what);
    } else if (n < 0 && errno == EINTR) {
      continue;
    } else {
      DDP_THROW(NetworkError, what, ": send failed: ", std::strerror(errno));
    }
  }
}

void recv_all(int fd, void* data, size_t size, const Deadline& deadline, const std::string& what) {
  auto* p = static_cast<char*>(data);
  while (size > 0) {
    ssize_t n = ::recv(fd, p, size, MSG_DONTWAIT);
    if (n > 0) {
      p += n;
      size -= static_cast<size_t>(n);
    } else if (n == 0) {
      DDP_THROW(NetworkError, what, ": connection closed by peer");
    } else if (errno == EAGAIN || errno == EWOULDBLOCK) {
      wait_fd(fd, POLLIN, deadline, what);
    } else if (errno != EINTR) {
      DDP_THROW(NetworkError, what, ": recv failed: ", std::strerror(errno));
    }
  }
}

std::string hostname() {
  char buf[256] = {};
  if (::gethostname(buf, sizeof(buf) - 1) != 0) DDP_THROW_ERRNO("gethostname");
  return buf;
}

std::string boot_id() {
  std::ifstream in("/proc/sys/kernel/random/boot_id");
  std::string id;
  std::getline(in, id);
  return id.empty() ? hostname() : id;
}

std::string same_host_key() {
  std::string key = boot_id();
  for (const char* ns : {"ipc", "net"}) {
    char link[128] = {};
    const std::string path = std::string("/proc/self/ns/") + ns;
    ssize_t n = ::readlink(path.c_str(), link, sizeof link - 1);
    if (n > 0) {
      key.push_back('/');
      key.append(link, static_cast<size_t>(n));  // "ipc:[4026531839]"
    }
  }
  return key;
}

}  // namespace ddp::net
