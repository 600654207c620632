// The store rules of the server's event loop: requests, waits parked by key, notifications.
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
      unpark(c);
      Writer w(MsgType::kTimedOut);
      w.strs(missing(c.wait_keys));
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
  switch (type) {
    case MsgType::kSet: {
      std::string key = r.key();
      Bytes value = r.bytes(kMaxValueSize);
      r.done();
      data_[key] = std::move(value);
      send(c, Writer(MsgType::kOk).finish());
      return notify(key);
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
    case MsgType::kAdd:
      return handle_add(c, r);
    case MsgType::kCompareSet:
      return handle_compare_set(c, r);
    default:
      return handle_query(c, type, r);
  }
}

void TCPStoreServer::Loop::handle_add(Conn& c, Reader& r) {
  std::string key = r.key();
  int64_t delta = r.i64();
  r.done();
  int64_t value = delta;
  if (auto it = data_.find(key); it != data_.end()) {
    try {
      value = checked_add(key, parse_counter(key, it->second), delta);
    } catch (const InvalidArgument& e) {
      return reply_error(c, ErrorCode::kInvalidArgument, e.message());
    }
  }
  data_[key] = Store::to_bytes(std::to_string(value));
  send(c, Writer(MsgType::kOk).i64(value).finish());
  notify(key);
}

void TCPStoreServer::Loop::handle_compare_set(Conn& c, Reader& r) {
  std::string key = r.key();
  Bytes expected = r.bytes(kMaxValueSize);
  Bytes desired = r.bytes(kMaxValueSize);
  r.done();
  auto it = data_.find(key);
  if (it == data_.end() ? !expected.empty() : it->second != expected) {
    send(c, Writer(MsgType::kOk).bytes(it == data_.end() ? expected : it->second).finish());
    return;
  }
  data_[key] = desired;
  send(c, Writer(MsgType::kOk).bytes(desired).finish());
  notify(key);
}

// Requests that only read (or delete, which wakes nobody).
void TCPStoreServer::Loop::handle_query(Conn& c, MsgType type, Reader& r) {
  Writer w(MsgType::kOk);
  switch (type) {
    case MsgType::kCheck: {
      auto keys = r.keys();
      r.done();
      w.u8(missing(keys).empty() ? 1 : 0);
      break;
    }
    case MsgType::kDelete: {
      std::string key = r.key();
      r.done();
      w.u8(data_.erase(key) > 0 ? 1 : 0);
      break;
    }
    case MsgType::kNumKeys:
      r.done();
      w.i64(static_cast<int64_t>(data_.size()));
      break;
    default:
      DDP_THROW(rdzv::proto::ProtocolError, "unknown request type ", static_cast<int>(type));
  }
  send(c, w.finish());
}

void TCPStoreServer::Loop::start_wait(Conn& c, MsgType type, std::vector<std::string> keys) {
  c.waiting = true;
  c.wait_type = type;
  c.wait_keys = std::move(keys);
  owner_->num_waiting_.fetch_add(1);
  try_finish_wait(c);
}

// Answers the pending wait when every key exists, else parks it under the first missing key.
bool TCPStoreServer::Loop::try_finish_wait(Conn& c) {
  for (const auto& k : c.wait_keys) {
    if (!data_.count(k)) {
      park(c, k);
      return false;
    }
  }
  Writer w(MsgType::kOk);
  if (c.wait_type == MsgType::kGet) w.bytes(data_.at(c.wait_keys.front()));
  c.waiting = false;
  c.wait_keys.clear();
  owner_->num_waiting_.fetch_sub(1);
  send(c, w.finish());
  return true;
}

void TCPStoreServer::Loop::park(Conn& c, const std::string& key) {
  waiters_[key].push_back(c.id);
  c.waiting_on = key;
}

void TCPStoreServer::Loop::unpark(Conn& c) {
  auto it = waiters_.find(c.waiting_on);
  if (it == waiters_.end()) return;
  auto& ids = it->second;
  ids.erase(std::remove(ids.begin(), ids.end(), c.id), ids.end());
  if (ids.empty()) waiters_.erase(it);
}

void TCPStoreServer::Loop::notify(const std::string& key) {
  auto it = waiters_.find(key);
  if (it == waiters_.end()) return;
  std::vector<uint64_t> ids = std::move(it->second);
  waiters_.erase(it);
  for (uint64_t id : ids) {
    auto cit = conns_.find(id);
    if (cit == conns_.end() || !cit->second->waiting) continue;
    Conn& waiter = *cit->second;
    if (try_finish_wait(waiter)) {
      if (!flush(waiter)) {
        to_close_.push_back(id);
      } else {
        update_interest(waiter);
      }
      account(waiter);
    }
  }
}

std::vector<std::string> TCPStoreServer::Loop::missing(const std::vector<std::string>& keys) const {
  std::vector<std::string> out;
  for (const auto& k : keys) {
    if (!data_.count(k)) out.push_back(k);
  }
  return out;
}

void TCPStoreServer::Loop::reply_error(Conn& c, ErrorCode code, const std::string& message) {
  Writer w(MsgType::kError);
  w.u8(static_cast<uint8_t>(code)).str(message);
  send(c, w.finish());
  if (code != ErrorCode::kInvalidArgument) c.close_after_flush = true;
}

}  // namespace ddp::rdzv
