#pragma once
// Forked child processes for multi-process tests. The child runs a function and _exits with
// its return value (or 99 on an exception), never returning into doctest. Killed and reaped
// by the destructor if still running.
#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <functional>
#include <thread>

#include "common/error.h"

namespace ddp::rdzv::testing {

class Child {
 public:
  explicit Child(const std::function<int()>& body) {
    pid_ = ::fork();
    if (pid_ < 0) DDP_THROW_ERRNO("fork");
    if (pid_ == 0) {
      int rc = 99;
      try {
        rc = body();
      } catch (...) {
      }
      ::_exit(rc);
    }
  }
  ~Child() {
    if (pid_ > 0 && !reaped_) {
      ::kill(pid_, SIGKILL);
      ::waitpid(pid_, nullptr, 0);
    }
  }
  Child(const Child&) = delete;
  Child& operator=(const Child&) = delete;

  pid_t pid() const { return pid_; }
  void kill(int sig = SIGKILL) const { ::kill(pid_, sig); }
  // Waits up to `timeout` for the child; returns its exit code, 128+signal, or -1 on timeout.
  int wait(std::chrono::milliseconds timeout = std::chrono::milliseconds(60'000)) {
    auto end = std::chrono::steady_clock::now() + timeout;
    while (true) {
      int status = 0;
      pid_t r = ::waitpid(pid_, &status, WNOHANG);
      if (r == pid_) {
        reaped_ = true;
        return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
      }
      if (std::chrono::steady_clock::now() >= end) return -1;
      std::this_thread::sleep_for(std::chrono::milliseconds(2));
    }
  }

 private:
  pid_t pid_ = -1;
  bool reaped_ = false;
};

// A pipe for a child to hand a small value (a port) to its parent.
class Pipe {
 public:
  Pipe() {
    if (::pipe2(fds_, O_CLOEXEC) != 0) DDP_THROW_ERRNO("pipe2");
  }
  ~Pipe() {
    for (int fd : fds_) {
      if (fd >= 0) ::close(fd);
    }
  }
  Pipe(const Pipe&) = delete;
  Pipe& operator=(const Pipe&) = delete;
  void write_u32(uint32_t v) const {
    ssize_t n = ::write(fds_[1], &v, sizeof(v));
    (void)n;
  }
  // Blocks until the value arrives; 0 if the writer exited without writing.
  uint32_t read_u32() {
    uint32_t v = 0;
    ::close(fds_[1]);
    fds_[1] = -1;
    ssize_t n = ::read(fds_[0], &v, sizeof(v));
    return n == sizeof(v) ? v : 0;
  }

 private:
  int fds_[2] = {-1, -1};
};

}  // namespace ddp::rdzv::testing
