#pragma once
// TCPStoreServer: the server half of TCPStore. One event-loop thread (epoll) owns all keys: no
// locks on the data path. get/wait are answered by notification (a waiter is parked under one
// missing key); a client's Cancel drops its wait.
// - The handshake (tcp_store_handshake.h) proves the job token both ways; a refused client gets
//   an Error frame saying why, is closed and logged (logger "store").
// - Strangers cost little: before authentication a connection buffers at most one small frame,
//   must finish within handshake_timeout, and at most max_unauthenticated are kept (the oldest
//   dropped for a new one). A malformed, oversize or truncated frame, or a client vanishing
//   mid-request, closes that one connection; other clients and their data are unaffected.
// - Raises RLIMIT_NOFILE to its hard limit (thousands of connections). The destructor stops the
//   loop and joins it; it never throws.
#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <thread>

#include "common/fd.h"
#include "common/timeouts.h"

namespace ddp::rdzv {

inline constexpr Millis kStatsLogInterval{5'000};

struct TCPStoreServerOptions {
  std::string host;   // interface to bind; empty: all interfaces
  uint16_t port = 0;  // 0: an ephemeral port, see TCPStoreServer::port()
  // Clients must prove this token; empty: every client is accepted.
  std::string job_token;
  // A connection that has not authenticated by then is closed.
  Millis handshake_timeout = kDefaultStoreHandshakeTimeout;
  // Connections still in their handshake; beyond this the oldest is dropped.
  size_t max_unauthenticated = 4096;
};

struct TCPStoreServerStats {
  size_t connections = 0;
  size_t unauthenticated = 0;  // still in their handshake
  size_t buffered_bytes = 0;   // capacity of every connection's input and output buffers
  uint64_t requests = 0;       // requests answered or parked since the start (handshakes, Cancel: no)
  uint64_t bytes_in = 0;       // bytes read from every connection since the start (TCP payload)
  uint64_t bytes_out = 0;      // bytes written to them
};

class TCPStoreServer {
 public:
  explicit TCPStoreServer(const TCPStoreServerOptions& options);
  ~TCPStoreServer() noexcept;
  TCPStoreServer(const TCPStoreServer&) = delete;
  TCPStoreServer& operator=(const TCPStoreServer&) = delete;

  uint16_t port() const { return port_; }
  // Observability for tests and logs (updated by the loop thread). With the "store" logger at
  // debug, the loop also logs these every kStatsLogInterval (bench/scale.sh reads the rate).
  size_t num_connections() const { return num_connections_.load(); }
  size_t num_waiting() const { return num_waiting_.load(); }
  TCPStoreServerStats stats() const {
    return {num_connections_.load(), num_unauthenticated_.load(),
            buffered_bytes_.load(),  requests_.load(),
            bytes_in_.load(),        bytes_out_.load()};
  }

  class Loop;  // the event loop and its state (tcp_store_server.cc)

 private:
  uint16_t port_ = 0;
  std::atomic<size_t> num_connections_{0};
  std::atomic<size_t> num_waiting_{0};
  std::atomic<size_t> num_unauthenticated_{0};
  std::atomic<size_t> buffered_bytes_{0};
  std::atomic<uint64_t> requests_{0};
  std::atomic<uint64_t> bytes_in_{0};
  std::atomic<uint64_t> bytes_out_{0};
  Fd wake_;  // eventfd: written by the destructor to stop the loop
  std::unique_ptr<Loop> loop_;
  std::thread thread_;
};

// Raises the RLIMIT_NOFILE soft limit to the hard limit; returns the new soft limit.
uint64_t raise_fd_limit();

}  // namespace ddp::rdzv
