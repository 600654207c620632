#pragma once
// Internal to SocketEngine: its operations and per-peer state, shared by socket_engine.cc (the
// progress loop, posting, reading, writing) and socket_engine_failure.cc (deadlines, lost peers).
#include <deque>
#include <memory>
#include <string>
#include <vector>

#include "comm/tcp/mailbox.h"
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

struct SocketEngine::AnyRecv {
  MailKey key;
  RecvOp op;
  std::shared_ptr<int> source;
};

struct SocketEngine::Peer {
  Peer(std::string name, uint64_t max_unexpected_bytes) : mailbox(std::move(name), max_unexpected_bytes) {}
  Fd fd;
  bool alive = false;
  std::deque<SendOp> sendq;
  Mailbox mailbox;  // posted recvs and messages that came first; the payload's target
  // Reader state: touched only under io_mu_ (by the progress thread or a Driver).
  WireHeader hdr;
  size_t hdr_got = 0;
  // Bytes read past the piece asked for (SocketEngine::pull): the next header, a small payload.
  std::vector<char> ahead;
  size_t ahead_pos = 0;
  size_t ahead_len = 0;
  bool ahead_drained = false;  // the read that brought them emptied the socket
  bool said_bye = false;
};

}  // namespace ddp::comm::tcp
