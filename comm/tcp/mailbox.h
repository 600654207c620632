#pragma once
// Mailbox: how SocketEngine matches one peer's incoming messages with the recvs posted for
// them. No descriptors and no lock of its own: the engine calls it under its mutex
// (payload_target/received only from its progress thread).
// - Messages match recvs on (channel, tag), first posted first matched, first arrived first
//   taken; a message before its recv is buffered, at most max_unexpected_bytes per peer. A recv
//   that finds its message still arriving waits on it; the next posted recv queues behind.
// - Sizes must agree: a recv whose buffer differs from its message fails with InvalidArgument
//   and the message is consumed.
// - Operations end by completing, expiring (TimeoutError naming the peer) or failing (the
//   caller's error); messages that arrived before a failure still match later recvs.
// One message: arrive() (the header), payload_target()/received() until it is all there,
// complete(). Every ending is appended to `done`; the caller finishes the Works outside its lock.
#include <cstdint>
#include <deque>
#include <exception>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "comm/work.h"
#include "common/deadline.h"

namespace ddp::comm::tcp {

using MailKey = std::pair<uint8_t, int64_t>;  // (channel, tag)
using Completions = std::vector<std::pair<WorkPtr, std::exception_ptr>>;

struct RecvOp {
  char* data = nullptr;
  size_t bytes = 0;
  Clock::time_point deadline;
  WorkPtr work;
  std::string label;
};

class Mailbox {
 public:
  enum class Posted : uint8_t { kFinished, kWaiting, kQueued };
  struct Target {
    char* data = nullptr;  // null: discard `room` bytes (no recv wants them any more)
    size_t room = 0;
  };
  using ErrorFor = std::function<std::exception_ptr(const std::string& label)>;

  Mailbox(std::string peer_name, uint64_t max_unexpected_bytes);

  // A message for `key` arrived (or is arriving) before any recv took it.
  bool has_unexpected(const MailKey& key) const;
  // A recv posted for `key` waits for a message still to arrive.
  bool has_posted(const MailKey& key) const;
  // kFinished: it took a buffered message (done holds it); kWaiting: it waits on the message
  // now arriving; kQueued: it waits for a message to arrive.
  Posted post(const MailKey& key, RecvOp op, Completions& done);

  // A header announced `bytes` for `key`. Returns why the peer must be dropped (buffering it
  // would pass the limit, or no memory), else "". A zero-byte message completes at once.
  std::string arrive(const MailKey& key, size_t bytes, Completions& done);
  bool receiving() const { return receiving_; }  // between arrive() and complete()
  // Where the next payload bytes go; at most `discard_chunk` when they are discarded.
  Target payload_target(size_t discard_chunk) const;
  bool received(size_t n);  // true when the payload is all there: call complete()
  void complete(Completions& done);

  void expire(Clock::time_point now, Completions& done);
  void fail(const ErrorFor& err, Completions& done);  // every waiting recv; messages stay
  Clock::time_point next_deadline(Clock::time_point bound) const;
  uint64_t unexpected_bytes() const { return unexpected_bytes_; }

 private:
  struct Inbound {
    std::vector<char> data;
    bool complete = false;
    std::optional<RecvOp> waiter;
  };
  using InboundQueue = std::deque<std::shared_ptr<Inbound>>;

  void deliver(RecvOp& op, const Inbound& in, Completions& done) const;
  void drop(const MailKey& key, const std::shared_ptr<Inbound>& in);
  void promote(const MailKey& key, Completions& done);
  std::exception_ptr timed_out(const std::string& label, const char* what) const;
  std::exception_ptr size_mismatch(const RecvOp& op, size_t message_bytes) const;

  std::string peer_name_;
  uint64_t max_unexpected_bytes_;
  std::map<MailKey, std::deque<RecvOp>> posted_;
  std::map<MailKey, InboundQueue> unexpected_;
  uint64_t unexpected_bytes_ = 0;  // buffered in unexpected_, complete or arriving
  // The message now arriving.
  MailKey key_{};
  bool receiving_ = false;
  std::optional<RecvOp> active_;      // its payload goes straight into a posted buffer
  std::shared_ptr<Inbound> inbound_;  // ... or into a buffered message; neither: discarded
  size_t got_ = 0;
  size_t want_ = 0;
};

}  // namespace ddp::comm::tcp
