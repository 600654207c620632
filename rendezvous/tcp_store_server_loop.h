#pragma once
// Internal to the store server: the connection state and the event loop's declaration, shared
// by tcp_store_server.cc (sockets, accepts, the handshake, buffers) and tcp_store_requests.cc
// (the store rules: requests, waits and notifications). Not installed; not for other modules.
#include <sys/epoll.h>

#include <algorithm>
#include <deque>
#include <memory>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "common/deadline.h"
#include "common/error.h"
#include "common/fd.h"
#include "common/log.h"
#include "common/socket.h"
#include "rendezvous/key_table.h"
#include "rendezvous/store.h"
#include "rendezvous/tcp_store_handshake.h"
#include "rendezvous/tcp_store_protocol.h"
#include "rendezvous/tcp_store_server.h"

namespace ddp::rdzv::server_detail {

using proto::ErrorCode;
using proto::MsgType;
using proto::ProtocolError;
using proto::Reader;
using proto::Writer;

constexpr uint64_t kListenerId = 0;
constexpr uint64_t kWakeId = 1;
constexpr size_t kReadChunk = 64 * 1024;
constexpr size_t kReadBudget = 16 * kReadChunk;
// Stop reading from a connection whose replies pile up (it does not read): back-pressure.
constexpr size_t kOutHighWater = 4u << 20;
// Before the handshake a connection buffers at most one handshake frame: nothing for strangers.
constexpr size_t kPreAuthBuffer = proto::kFrameHeaderSize + proto::kMaxHandshakeFrame;
// Out of descriptors: how long to stop accepting before trying again.
constexpr Millis kAcceptPause{50};

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
  std::unique_ptr<proto::ServerHandshake> handshake;  // until authed
  size_t accounted = 0;                               // buffer bytes counted in the stats
  bool close_after_flush = false;
  // The one pending get/wait of this connection, parked in the key table under its id.
  bool waiting = false;
  MsgType wait_type = MsgType::kWait;
  std::vector<std::string> wait_keys;

  size_t out_pending() const { return out.size() - out_pos; }
};

}  // namespace ddp::rdzv::server_detail

namespace ddp::rdzv {

class TCPStoreServer::Loop {
  using Conn = server_detail::Conn;
  using ErrorCode = proto::ErrorCode;
  using MsgType = proto::MsgType;
  using Reader = proto::Reader;
  static constexpr uint64_t kListenerId = server_detail::kListenerId;
  static constexpr uint64_t kWakeId = server_detail::kWakeId;
  static constexpr size_t kReadChunk = server_detail::kReadChunk;

 public:
  Loop(TCPStoreServer* owner, Fd listener, const TCPStoreServerOptions& o)
      : owner_(owner),
        listener_(std::move(listener)),
        token_(o.job_token),
        handshake_timeout_(o.handshake_timeout),
        max_unauthenticated_(std::max<size_t>(1, o.max_unauthenticated)),
        log_(logger("store")),
        log_stats_(log_->should_log(spdlog::level::debug)) {
    epoll_ = Fd(::epoll_create1(EPOLL_CLOEXEC));
    if (!epoll_) DDP_THROW_ERRNO("epoll_create1 (store server)");
    net::set_nonblocking(listener_.get());
    add_fd(listener_.get(), kListenerId, EPOLLIN);
    add_fd(owner_->wake_.get(), kWakeId, EPOLLIN);
  }

  // Serves until stopped; an error no connection owns stops it, closing every connection and
  // the listener.
  void run() noexcept;

 private:
  void serve();
  void add_fd(int fd, uint64_t id, uint32_t events) {
    epoll_event ev{};
    ev.events = events;
    ev.data.u64 = id;
    if (::epoll_ctl(epoll_.get(), EPOLL_CTL_ADD, fd, &ev) != 0) DDP_THROW_ERRNO("epoll_ctl(ADD)");
  }
  void accept_all();
  bool evict_oldest_stranger(const char* why);
  void expire_handshakes();
  int next_timeout_ms() const;
  void log_stats();
  void account(Conn& c);
  void on_event(Conn& c, uint32_t events);
  bool read_some(Conn& c);
  size_t process_input(Conn& c);
  void handle_frame(Conn& c, Reader& r);
  void handle_handshake(Conn& c, const uint8_t* payload, size_t size);
  void handle_request(Conn& c, MsgType type, Reader& r);
  void handle_add(Conn& c, Reader& r);
  void handle_compare_set(Conn& c, Reader& r);
  void handle_query(Conn& c, MsgType type, Reader& r);
  void start_wait(Conn& c, MsgType type, std::vector<std::string> keys);
  void finish_wait(Conn& c);
  void answer(const KeyTable::Woken& woken);
  void reply_error(Conn& c, ErrorCode code, const std::string& message);
  void send(Conn& c, const std::vector<uint8_t>& frame);
  bool flush(Conn& c);
  void update_interest(Conn& c);
  void close_conn(uint64_t id, const std::string& why, bool warn);

  TCPStoreServer* owner_;
  Fd listener_;
  Fd epoll_;
  std::string token_;
  Millis handshake_timeout_;
  size_t max_unauthenticated_;
  std::shared_ptr<spdlog::logger> log_;
  bool listener_paused_ = false;
  Clock::time_point resume_accept_;
  bool stopping_ = false;
  bool log_stats_ = false;  // the "store" logger was at debug at the start
  Clock::time_point started_ = Clock::now();
  Clock::time_point next_stats_ = started_ + kStatsLogInterval;
  uint64_t next_id_ = 2;
  std::unordered_map<uint64_t, std::unique_ptr<Conn>> conns_;
  KeyTable table_;  // the keys and the waits parked on them (by connection id)
  std::vector<uint64_t> to_close_;
  // Connections in their handshake, oldest first, with their deadlines (entries of connections
  // that authenticated or closed since are skipped when met).
  std::deque<std::pair<uint64_t, Clock::time_point>> strangers_;
  size_t unauthenticated_ = 0;
  std::vector<uint8_t> scratch_ = std::vector<uint8_t>(kReadChunk);  // one read buffer for all
};

}  // namespace ddp::rdzv
