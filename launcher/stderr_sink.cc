#include "launcher/stderr_sink.h"

#include <unistd.h>

#include <cstdio>

#include "common/log.h"

namespace ddp::launcher {
namespace {

std::mutex& installed_mutex() {
  static std::mutex m;
  return m;
}

std::shared_ptr<StderrSink>& installed() {
  static std::shared_ptr<StderrSink> sink;
  return sink;
}

}  // namespace

StderrSink::StderrSink(int fd, size_t max_buffer) : console_(fd, "stderr", max_buffer) {}

void StderrSink::write_text(std::string_view text) {
  std::lock_guard<std::mutex> lock(mutex_);
  console_.flush();
  console_.write(text);
}

void StderrSink::sink_it_(const spdlog::details::log_msg& msg) {
  spdlog::memory_buf_t formatted;
  formatter_->format(msg, formatted);
  console_.flush();  // what an earlier line left buffered goes first
  console_.write(std::string_view(formatted.data(), formatted.size()));
}

void StderrSink::flush_() { console_.flush(); }

void StderrSink::drain(Millis stall) {
  std::lock_guard<std::mutex> lock(mutex_);
  console_.drain(stall);
  if (console_.dropped() > 0) {
    const uint64_t dropped = console_.dropped();
    console_.write("ddp-launch: warning: dropped " + std::to_string(dropped) +
                   " bytes of its own messages: stderr blocked\n");
    console_.drain(Millis(0));
  }
}

uint64_t StderrSink::dropped() {
  std::lock_guard<std::mutex> lock(mutex_);
  return console_.dropped();
}

std::shared_ptr<StderrSink> install_stderr_sink() {
  auto sink = std::make_shared<StderrSink>(STDERR_FILENO);
  set_log_sink(sink);
  std::lock_guard<std::mutex> lock(installed_mutex());
  installed() = sink;
  return sink;
}

void write_stderr(std::string_view text) {
  std::shared_ptr<StderrSink> sink;
  {
    std::lock_guard<std::mutex> lock(installed_mutex());
    sink = installed();
  }
  if (sink) {
    sink->write_text(text);
  } else {
    std::fwrite(text.data(), 1, text.size(), stderr);
  }
}

}  // namespace ddp::launcher
