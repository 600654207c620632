#pragma once
// TCP socket helpers shared by the store, the tcp backend and the launcher.
// All blocking helpers take a Deadline; a deadline that passes is a TimeoutError naming the
// peer, a peer that closes or resets is a NetworkError naming it. IPv4 and IPv6.
#include <cstddef>
#include <cstdint>
#include <string>

#include "common/deadline.h"
#include "common/fd.h"

namespace ddp::net {

struct Endpoint {
  std::string host;  // name, IPv4 or IPv6 literal (without brackets)
  uint16_t port = 0;
  std::string str() const;  // "host:port", "[v6]:port"
};

// "host:port", "[::1]:port", or "host" (then default_port). InvalidArgument names the text.
Endpoint parse_endpoint(const std::string& text, uint16_t default_port = 0);

struct ListenOptions {
  std::string host;   // empty: all interfaces (IPv6 dual-stack when available)
  uint16_t port = 0;  // 0: an ephemeral port; see local_port()
  int backlog = 4096;
  bool reuse_addr = true;
};
Fd listen_tcp(const ListenOptions& options);
uint16_t local_port(int fd);

// Connects, retrying refused/unreachable with exponential backoff and jitter until the deadline.
Fd connect_tcp(const Endpoint& peer, const Deadline& deadline);
// Attempts of connect_tcp in this process that failed (and were retried or given up on): lets
// a test see the retry path taken instead of sleeping and hoping.
uint64_t failed_connect_attempts();

void set_nonblocking(int fd, bool on = true);
void set_nodelay(int fd);
// Keepalive tuned so a silently dead host or link is noticed in about kLinkLossDetection.
void set_keepalive(int fd);
// TCP_NOTSENT_LOWAT: the socket takes new bytes (and polls writable) only while fewer than
// `bytes` of what it was given are still unsent. False where the socket refuses it (not TCP).
bool set_notsent_lowat(int fd, size_t bytes);

// Blocking-with-deadline transfers on a socket (works on blocking and non-blocking fds).
// `what` names the peer or operation for error messages.
void send_all(int fd, const void* data, size_t size, const Deadline& deadline, const std::string& what);
void recv_all(int fd, void* data, size_t size, const Deadline& deadline, const std::string& what);

// Host identity: hostname, and the kernel's boot id (same value <=> same host, same boot).
std::string hostname();
std::string boot_id();
// Who can share memory and loopback with whom: the boot id plus this process's IPC and network
// namespaces ("<boot id>/ipc:[N]/net:[M]"). Two processes in different containers on one host
// share the boot id but not /dev/shm or 127.0.0.1: their keys differ, so they use sockets.
std::string same_host_key();

}  // namespace ddp::net
