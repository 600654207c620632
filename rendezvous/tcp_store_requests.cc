// The server's event loop speaking the store: requests over the key table (key_table.h: the
// rules and the parked waits, shared with HashStore), replies, and the waits a write completes.
// Runs on the loop thread only (see tcp_store_server.h); sockets live in tcp_store_server.cc.
#include <algorithm>

#include "common/error.h"
#include "rendezvous/tcp_store_server_loop.h"

namespace ddp::rdzv {

using namespace server_detail;
using proto::Writer;

void TCPStoreServer::Loop::handle_frame(Conn& c, Reader& r) {
  MsgType type = r.type();
  if (type == MsgType::kCancel) {
    r.done();
    if (c.waiting) {
      table_.cancel(c.id);
      Writer w(MsgType::kTimedOut);
      w.strs(table_.missing(c.wait_keys));
      c.waiting = false;
      c.wait_keys.clear();
      owner_->num_waiting_.fetch_sub(1);
      send(c, w.finish());
    }
    return;  // a Cancel that finds nothing pending lost the race with the reply: ignored
  }
  if (c.waiting) {
    DDP_THROW(rdzv::proto::ProtocolError, proto::type_name(type), " request while a wait is pending");
  }
  handle_request(c, type, r);
}

void TCPStoreServer::Loop::handle_request(Conn& c, MsgType type, Reader& r) {
  owner_->requests_.fetch_add(1, std::memory_order_relaxed);
  switch (type) {
    case MsgType::kSet: {
      std::string key = r.key();
      Bytes value = r.bytes(kMaxValueSize);
      r.done();
      KeyTable::Woken woken = table_.set(key, std::move(value));
      send(c, Writer(MsgType::kOk).finish());
      return answer(woken);
    }
    case MsgType::kGet: {
      std::string key = r.key();
      r.done();
      return start_wait(c, type, {std::move(key)});
    }
    case MsgType::kWait: {
      auto keys = r.keys();
      r.done();
      return start_wait(c, type, std::move(keys));
    }
    case MsgType::kAdd: return handle_add(c, r);
    case MsgType::kCompareSet: return handle_compare_set(c, r);
    default: return handle_query(c, type, r);
  }
}

void TCPStoreServer::Loop::handle_add(Conn& c, Reader& r) {
  std::string key = r.key();
  int64_t delta = r.i64();
  r.done();
  KeyTable::AddResult result;
  try {
    result = table_.add(key, delta);
  } catch (const InvalidArgument& e) {
    return reply_error(c, ErrorCode::kInvalidArgument, e.message());
  }
  send(c, Writer(MsgType::kOk).i64(result.value).finish());
  answer(result.woken);
}

void TCPStoreServer::Loop::handle_compare_set(Conn& c, Reader& r) {
  std::string key = r.key();
  Bytes expected = r.bytes(kMaxValueSize);
  Bytes desired = r.bytes(kMaxValueSize);
  r.done();
  KeyTable::CompareSetResult result = table_.compare_set(key, expected, desired);
  send(c, Writer(MsgType::kOk).bytes(result.value).finish());
  answer(result.woken);
}

// Requests that only read (or delete, which wakes nobody).
void TCPStoreServer::Loop::handle_query(Conn& c, MsgType type, Reader& r) {
  Writer w(MsgType::kOk);
  switch (type) {
    case MsgType::kCheck: {
      auto keys = r.keys();
      r.done();
      w.u8(table_.missing(keys).empty() ? 1 : 0);
      break;
    }
    case MsgType::kDelete: {
      std::string key = r.key();
      r.done();
      w.u8(table_.erase(key) ? 1 : 0);
      break;
    }
    case MsgType::kNumKeys:
      r.done();
      w.i64(static_cast<int64_t>(table_.size()));
      break;
    default: DDP_THROW(rdzv::proto::ProtocolError, "unknown request type ", static_cast<int>(type));
  }
  send(c, w.finish());
}

void TCPStoreServer::Loop::start_wait(Conn& c, MsgType type, std::vector<std::string> keys) {
  c.waiting = true;
  c.wait_type = type;
  c.wait_keys = std::move(keys);
  owner_->num_waiting_.fetch_add(1);
  if (table_.wait(c.id, c.wait_keys)) finish_wait(c);  // else parked until a write completes it
}

// Answers the pending wait; every key is present.
void TCPStoreServer::Loop::finish_wait(Conn& c) {
  Writer w(MsgType::kOk);
  if (c.wait_type == MsgType::kGet) w.bytes(*table_.find(c.wait_keys.front()));
  c.waiting = false;
  c.wait_keys.clear();
  owner_->num_waiting_.fetch_sub(1);
  send(c, w.finish());
}

// The waits a write completed: each gets its answer now, sent at once.
void TCPStoreServer::Loop::answer(const KeyTable::Woken& woken) {
  for (uint64_t id : woken) {
    auto cit = conns_.find(id);
    if (cit == conns_.end() || !cit->second->waiting) continue;
    Conn& waiter = *cit->second;
    finish_wait(waiter);
    if (!flush(waiter)) {
      to_close_.push_back(id);
    } else {
      update_interest(waiter);
    }
    account(waiter);
  }
}

void TCPStoreServer::Loop::reply_error(Conn& c, ErrorCode code, const std::string& message) {
  Writer w(MsgType::kError);
  w.u8(static_cast<uint8_t>(code)).str(message);
  send(c, w.finish());
  if (code != ErrorCode::kInvalidArgument) c.close_after_flush = true;
}

}  // namespace ddp::rdzv
