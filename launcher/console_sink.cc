#include "launcher/console_sink.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>

namespace ddp::launcher {
namespace {

constexpr size_t kPage = 4096;  // a pipe with room takes at least a page without blocking

}  // namespace

ConsoleSink::ConsoleSink(int fd, std::string name, size_t max_buffer)
    : name_(std::move(name)), max_buffer_(max_buffer), out_(fd) {
  struct stat st {};
  if (fd < 0 || ::fstat(fd, &st) != 0) {
    gone_ = true;
    return;
  }
  if (S_ISSOCK(st.st_mode)) {
    mode_ = Mode::kSocket;
    pollable_ = true;
  } else if (S_ISFIFO(st.st_mode) || S_ISCHR(st.st_mode)) {
    const int flags = ::fcntl(fd, F_GETFL);
    if (flags >= 0 && (flags & O_NONBLOCK) != 0) {
      mode_ = Mode::kNonBlocking;  // already non-blocking: nothing to do
    } else {
      const std::string self = "/proc/self/fd/" + std::to_string(fd);
      reopened_ = Fd(::open(self.c_str(), O_WRONLY | O_NONBLOCK | O_NOCTTY | O_CLOEXEC | (flags & O_APPEND)));
      if (reopened_) {
        out_ = reopened_.get();
        mode_ = Mode::kNonBlocking;
      } else {
        mode_ = S_ISFIFO(st.st_mode) ? Mode::kPollFirst : Mode::kPlain;
      }
    }
    pollable_ = mode_ != Mode::kPlain;
  }
}

ConsoleSink::~ConsoleSink() = default;

ssize_t ConsoleSink::try_write(const char* data, size_t size) {
  if (gone_) return -1;
  while (true) {
    ssize_t n = 0;
    switch (mode_) {
      case Mode::kSocket: n = ::send(out_, data, size, MSG_DONTWAIT | MSG_NOSIGNAL); break;
      case Mode::kPollFirst: {
        pollfd p{out_, POLLOUT, 0};
        if (::poll(&p, 1, 0) <= 0 || (p.revents & POLLOUT) == 0) {
          if (p.revents & (POLLERR | POLLHUP)) break;  // the write below reports it
          return 0;
        }
        n = ::write(out_, data, std::min(size, kPage));
        break;
      }
      case Mode::kNonBlocking:
      case Mode::kPlain: n = ::write(out_, data, size); break;
    }
    if (n >= 0) return n;
    if (errno == EINTR) continue;
    if (errno == EAGAIN || errno == EWOULDBLOCK) return 0;
    gone_ = true;  // EPIPE, EBADF, EIO: the console is gone; output is dropped from now on
    return -1;
  }
}

void ConsoleSink::write(std::string_view data) {
  if (data.empty()) return;
  if (gone_) {
    dropped_ += data.size();
    return;
  }
  if (buffer_.empty()) {
    // The common case: the console takes it all at once.
    while (!data.empty()) {
      ssize_t n = try_write(data.data(), data.size());
      if (n <= 0) break;
      data.remove_prefix(static_cast<size_t>(n));
    }
    if (data.empty()) return;
    if (gone_) {
      dropped_ += data.size();
      return;
    }
  }
  if (buffer_.size() - head_ + data.size() > max_buffer_) {
    dropped_ += data.size();  // whole: a chunk is kept or dropped, never cut mid-line
    return;
  }
  if (head_ > 0 && head_ >= buffer_.size() / 2) {
    buffer_.erase(0, head_);
    head_ = 0;
  }
  buffer_.append(data);
}

bool ConsoleSink::flush() {
  while (head_ < buffer_.size()) {
    ssize_t n = try_write(buffer_.data() + head_, buffer_.size() - head_);
    if (n < 0) {
      dropped_ += buffer_.size() - head_;
      break;
    }
    if (n == 0) return false;
    head_ += static_cast<size_t>(n);
  }
  buffer_.clear();
  head_ = 0;
  return true;
}

void ConsoleSink::drain(Millis stall) {
  using namespace std::chrono;
  auto last_progress = steady_clock::now();
  while (!flush()) {
    const size_t before = buffer_.size() - head_;
    const auto left = stall - duration_cast<milliseconds>(steady_clock::now() - last_progress);
    if (left.count() <= 0 || !pollable_) break;
    pollfd p{out_, POLLOUT, 0};
    ::poll(&p, 1, static_cast<int>(std::min<int64_t>(left.count(), 100)));
    flush();
    if (buffer_.size() - head_ != before) last_progress = steady_clock::now();
  }
  if (head_ < buffer_.size()) dropped_ += buffer_.size() - head_;
  buffer_.clear();
  head_ = 0;
}

std::string ConsoleSink::dropped_message() const {
  if (dropped_ == 0) return "";
  return "ddp-launch: warning: dropped " + std::to_string(dropped_) + " bytes of worker output: " + name_ +
         (gone_ ? " closed\n" : " blocked\n");
}

}  // namespace ddp::launcher
