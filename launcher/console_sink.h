#pragma once
// ConsoleSink: the launcher's writer to its own stdout or stderr when it relays worker output.
// Promise: write() never blocks. A console that stops reading (`--tee 3 ... | slow-reader`, a
// terminal paused with Ctrl-S) must not freeze the supervisor's loop (signals, reaping, SIGKILL
// escalation). What the console does not take at once is buffered (whole chunks of whole lines, in
// order: lines never interleave) up to max_buffer; past that, chunks are dropped, counted, and
// the count said once at the end. Non-blocking without touching the description others share: a
// pipe or terminal is reopened through /proc/self/fd with O_NONBLOCK (a description of our own),
// a socket written with MSG_DONTWAIT, a regular file or /dev/null as is; a pipe that cannot be
// reopened (no /proc) is written only when poll says there is room, a page at a time.
// Single-threaded: owned by the supervisor loop. A console that is gone (EPIPE) drops quietly.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "common/fd.h"
#include "common/timeouts.h"

namespace ddp::launcher {

class ConsoleSink {
 public:
  static constexpr size_t kDefaultMaxBuffer = 4 << 20;

  // fd: the console (not owned; it stays open); name: "stdout" or "stderr", for the message.
  ConsoleSink(int fd, std::string name, size_t max_buffer = kDefaultMaxBuffer);
  ConsoleSink(const ConsoleSink&) = delete;
  ConsoleSink& operator=(const ConsoleSink&) = delete;
  ~ConsoleSink();

  // Writes what the console takes now and buffers the rest (or drops all of `data` when the
  // buffer cannot hold it: a chunk is kept or dropped whole).
  void write(std::string_view data);
  // Writes buffered bytes while the console takes them. True when nothing is left.
  bool flush();
  bool pending() const { return !buffer_.empty(); }
  // Wait on this for EPOLLOUT while pending(); -1 when the console cannot be polled (a regular
  // file: it never blocks, so nothing is ever pending).
  int poll_fd() const { return pollable_ ? out_ : -1; }
  // At the end: keeps writing while the console makes progress, gives up (dropping the rest)
  // after `stall` without any, so a console nobody reads cannot keep the launcher alive.
  void drain(Millis stall);

  uint64_t dropped() const { return dropped_; }
  const std::string& name() const { return name_; }
  // "ddp-launch: dropped N bytes of worker output: stdout blocked" (or "closed" when the reader
  // went away), or "" when nothing was dropped.
  std::string dropped_message() const;

 private:
  enum class Mode { kPlain, kNonBlocking, kSocket, kPollFirst };
  // Bytes written now without blocking (0 when the console is full), or -1 when it is gone.
  ssize_t try_write(const char* data, size_t size);

  std::string name_;
  size_t max_buffer_;
  Fd reopened_;  // our own O_NONBLOCK description of a pipe or terminal
  int out_ = -1;
  Mode mode_ = Mode::kPlain;
  bool pollable_ = false;
  bool gone_ = false;
  std::string buffer_;
  size_t head_ = 0;  // bytes of buffer_ already written
  uint64_t dropped_ = 0;
};

}  // namespace ddp::launcher
