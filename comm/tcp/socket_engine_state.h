#pragma once
// Internal to SocketEngine: its operations and per-peer state, shared by socket_engine.cc (the
// progress loop, posting, reading, writing) and socket_engine_failure.cc (deadlines, lost peers).
#include <deque>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "comm/tcp/socket_engine.h"
#include "comm/tcp/wire_header.h"
#include "common/error.h"

namespace ddp::comm::tcp {

template <typename E>
std::exception_ptr engine_error(const std::string& what) {
  return std::make_exception_ptr(E(what, __FILE__, __LINE__));
}

struct SocketEngine::SendOp {
  WireHeader hdr;
  const char* data = nullptr;
  size_t bytes = 0;
  size_t sent = 0;  // header and payload bytes written
  Clock::time_point deadline;
  WorkPtr work;  // null once finished early (timed out while in progress)
  std::string label;
  std::vector<char> owned;
};

struct SocketEngine::RecvOp {
  char* data = nullptr;
  size_t bytes = 0;
  Clock::time_point deadline;
  WorkPtr work;
  std::string label;
};

struct SocketEngine::Inbound {
  std::vector<char> data;
  bool complete = false;
  std::optional<RecvOp> waiter;
};

struct SocketEngine::Peer {
  Fd fd;
  bool alive = false;
  std::deque<SendOp> sendq;
  std::map<Key, std::deque<RecvOp>> posted;
  std::map<Key, std::deque<std::shared_ptr<Inbound>>> unexpected;
  // Reader state: touched only by the engine thread.
  WireHeader hdr;
  size_t hdr_got = 0;
  bool in_payload = false;
  bool said_bye = false;
  std::optional<RecvOp> active;       // payload goes straight into a posted buffer
  std::shared_ptr<Inbound> inbound;   // ... or into an unexpected message
  uint64_t unexpected_bytes = 0;      // buffered in `unexpected`, complete or arriving
  size_t got = 0, want = 0;           // payload progress; neither target: discard
};

}  // namespace ddp::comm::tcp
