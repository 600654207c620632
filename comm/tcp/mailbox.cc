#include "comm/tcp/mailbox.h"

#include <algorithm>
#include <cstring>
#include <new>

#include "comm/tcp/wire_header.h"
#include "common/error.h"

namespace ddp::comm::tcp {

Mailbox::Mailbox(std::string peer_name, uint64_t max_unexpected_bytes)
    : peer_name_(std::move(peer_name)), max_unexpected_bytes_(max_unexpected_bytes) {}

bool Mailbox::has_unexpected(const MailKey& key) const {
  auto it = unexpected_.find(key);
  return it != unexpected_.end() && !it->second.empty();
}

bool Mailbox::has_posted(const MailKey& key) const {
  auto it = posted_.find(key);
  return it != posted_.end() && !it->second.empty();
}

Mailbox::Posted Mailbox::post(const MailKey& key, RecvOp op, Completions& done) {
  if (!has_unexpected(key)) {
    posted_[key].push_back(std::move(op));
    return Posted::kQueued;
  }
  std::shared_ptr<Inbound> in = unexpected_[key].front();
  if (!in->complete) {
    if (!in->waiter) {  // the message is still arriving: take it when it completes
      in->waiter = std::move(op);
      return Posted::kWaiting;
    }
    posted_[key].push_back(std::move(op));  // a recv already waits on it: queue behind
    return Posted::kQueued;
  }
  drop(key, in);
  deliver(op, *in, done);
  return Posted::kFinished;
}

std::string Mailbox::arrive(const MailKey& key, size_t bytes, Completions& done) {
  key_ = key;
  got_ = 0;
  want_ = bytes;
  active_.reset();
  inbound_.reset();
  auto it = posted_.find(key);
  if (it != posted_.end() && !it->second.empty()) {
    RecvOp op = std::move(it->second.front());
    it->second.pop_front();
    if (it->second.empty()) posted_.erase(it);
    if (op.bytes != bytes) {  // the payload is discarded
      done.emplace_back(op.work, size_mismatch(op, bytes));
    } else {
      active_ = std::move(op);
    }
  } else {
    std::string why = check_unexpected(bytes, unexpected_bytes_, max_unexpected_bytes_);
    if (!why.empty()) return why;
    try {
      auto in = std::make_shared<Inbound>();
      in->data.resize(bytes);
      inbound_ = std::move(in);
    } catch (const std::bad_alloc&) {
      return detail::str("no memory to buffer its message of ", bytes, " bytes");
    }
    unexpected_bytes_ += bytes;
    unexpected_[key].push_back(inbound_);
  }
  receiving_ = true;
  if (bytes == 0) complete(done);
  return {};
}

Mailbox::Target Mailbox::payload_target(size_t discard_chunk) const {
  if (active_) return {active_->data + got_, want_ - got_};
  if (inbound_) return {inbound_->data.data() + got_, want_ - got_};
  return {nullptr, std::min(want_ - got_, discard_chunk)};
}

bool Mailbox::received(size_t n) {
  got_ += n;
  return got_ >= want_;
}

void Mailbox::complete(Completions& done) {
  receiving_ = false;
  if (active_) {
    done.emplace_back(active_->work, nullptr);
    active_.reset();
    return;
  }
  if (!inbound_) return;  // discarded: its recv expired or failed meanwhile
  std::shared_ptr<Inbound> in = std::move(inbound_);
  in->complete = true;
  if (in->waiter) {
    RecvOp op = std::move(*in->waiter);
    in->waiter.reset();
    drop(key_, in);
    deliver(op, *in, done);
  }
  promote(key_, done);
}

// The next posted recvs of `key` take the buffered messages, oldest first, while both last.
void Mailbox::promote(const MailKey& key, Completions& done) {
  while (true) {
    auto pit = posted_.find(key);
    if (pit == posted_.end() || !has_unexpected(key)) return;
    std::shared_ptr<Inbound> next = unexpected_[key].front();
    if (!next->complete && next->waiter) return;
    RecvOp op = std::move(pit->second.front());
    pit->second.pop_front();
    if (pit->second.empty()) posted_.erase(pit);
    if (!next->complete) {
      next->waiter = std::move(op);
      return;
    }
    drop(key, next);
    deliver(op, *next, done);
  }
}

// Copies a complete message into the recv's buffer, or fails the recv when the sizes differ.
void Mailbox::deliver(RecvOp& op, const Inbound& in, Completions& done) const {
  if (in.data.size() != op.bytes) {
    done.emplace_back(op.work, size_mismatch(op, in.data.size()));
    return;
  }
  if (op.bytes) std::memcpy(op.data, in.data.data(), op.bytes);
  done.emplace_back(op.work, nullptr);
}

// Removes a buffered message of `key` (taken by a recv) and its bytes from the count.
void Mailbox::drop(const MailKey& key, const std::shared_ptr<Inbound>& in) {
  auto it = unexpected_.find(key);
  if (it == unexpected_.end()) return;
  auto pos = std::find(it->second.begin(), it->second.end(), in);
  if (pos == it->second.end()) return;
  it->second.erase(pos);
  if (it->second.empty()) unexpected_.erase(it);
  unexpected_bytes_ -= in->data.size();
}

std::exception_ptr Mailbox::size_mismatch(const RecvOp& op, size_t message_bytes) const {
  const std::string what = detail::str(op.label, ": the message from ", peer_name_, " holds ", message_bytes,
                                       " bytes but the buffer holds ", op.bytes);
  return std::make_exception_ptr(InvalidArgument(what, __FILE__, __LINE__));
}

std::exception_ptr Mailbox::timed_out(const std::string& label, const char* what) const {
  return std::make_exception_ptr(
      TimeoutError(detail::str(label, ": timed out ", what, " ", peer_name_), __FILE__, __LINE__));
}

void Mailbox::expire(Clock::time_point now, Completions& done) {
  for (auto it = posted_.begin(); it != posted_.end();) {
    auto& q = it->second;
    for (auto op = q.begin(); op != q.end();) {
      if (op->deadline > now) {
        ++op;
      } else {
        done.emplace_back(op->work, timed_out(op->label, "waiting for a message from"));
        op = q.erase(op);
      }
    }
    it = q.empty() ? posted_.erase(it) : std::next(it);
  }
  for (auto& [key, q] : unexpected_) {
    for (auto& in : q) {
      if (in->waiter && in->waiter->deadline <= now) {
        done.emplace_back(in->waiter->work, timed_out(in->waiter->label, "receiving from"));
        in->waiter.reset();
      }
    }
  }
  if (active_ && active_->deadline <= now) {  // the rest of the payload is discarded
    done.emplace_back(active_->work, timed_out(active_->label, "receiving from"));
    active_.reset();
  }
}

void Mailbox::fail(const ErrorFor& err, Completions& done) {
  for (auto& [key, q] : posted_) {
    for (auto& op : q) done.emplace_back(op.work, err(op.label));
  }
  posted_.clear();
  for (auto& [key, q] : unexpected_) {
    for (auto& in : q) {
      if (in->waiter) done.emplace_back(in->waiter->work, err(in->waiter->label));
      in->waiter.reset();
    }
  }
  if (active_) {
    done.emplace_back(active_->work, err(active_->label));
    active_.reset();
  }
}

Clock::time_point Mailbox::next_deadline(Clock::time_point bound) const {
  Clock::time_point next = bound;
  for (auto& [key, q] : posted_) {
    for (auto& op : q) next = std::min(next, op.deadline);
  }
  for (auto& [key, q] : unexpected_) {
    for (auto& in : q) {
      if (in->waiter) next = std::min(next, in->waiter->deadline);
    }
  }
  if (active_) next = std::min(next, active_->deadline);
  return next;
}

}  // namespace ddp::comm::tcp
