#pragma once
// StderrSink: the launcher's own lines on its stderr — every ddp logger's (spdlog) once
// install() ran, and its messages (failure summaries, "stopped by ...") through write_stderr().
//
// Promise: never blocks. A stderr that stops being read (a pipe nobody drains, a terminal
// paused with Ctrl-S) must not stop supervision: signals, reaping and the SIGKILL escalation go
// on. Lines go through a ConsoleSink (console_sink.h: our own O_NONBLOCK description of a pipe
// or terminal): what stderr does not take at once is buffered, whole lines in order, up to
// kMaxBuffer, and written before the next line and at the end (drain, bounded by a stall);
// past the buffer, lines are dropped and counted, and the count said at the end if it can be.
//
// Thread-safe (one mutex: spdlog's base_sink). install() before other threads log.
#include <spdlog/sinks/base_sink.h>

#include <memory>
#include <mutex>
#include <string>
#include <string_view>

#include "common/timeouts.h"
#include "launcher/console_sink.h"

namespace ddp::launcher {

class StderrSink : public spdlog::sinks::base_sink<std::mutex> {
 public:
  static constexpr size_t kMaxBuffer = 1 << 20;

  explicit StderrSink(int fd, size_t max_buffer = kMaxBuffer);
  // Text that is not a log line (already formatted, any number of lines).
  void write_text(std::string_view text);
  // At the end: what is buffered, while stderr takes it (at most `stall` without progress);
  // then, if anything was dropped, one line saying how much (also only if stderr takes it).
  void drain(Millis stall);
  uint64_t dropped();

 protected:
  void sink_it_(const spdlog::details::log_msg& msg) override;
  void flush_() override;

 private:
  ConsoleSink console_;
};

// Makes a StderrSink on fd 2 the sink of every ddp logger and of write_stderr(); returns it.
std::shared_ptr<StderrSink> install_stderr_sink();
// Through the installed sink; plain stderr when none is installed (tests, library users).
void write_stderr(std::string_view text);

}  // namespace ddp::launcher
