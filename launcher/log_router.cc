#include "launcher/log_router.h"

#include <errno.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/error.h"

namespace ddp::launcher {
namespace {

constexpr int kOut = 1;
constexpr int kErr = 2;

bool selection_given(const StreamSelection& s) { return s.all != 0 || !s.per_rank.empty(); }

// Writes everything to a log file (a regular file: it does not block). A destination that is
// gone drops the output rather than failing the job.
void write_all(int fd, const char* data, size_t size) {
  while (size > 0) {
    ssize_t n = ::write(fd, data, size);
    if (n > 0) {
      data += n;
      size -= static_cast<size_t>(n);
    } else if (n < 0 && errno == EINTR) {
      continue;
    } else {
      return;
    }
  }
}

}  // namespace

std::string attempt_log_dir(const std::string& log_dir, const std::string& run_id, int restart_count) {
  return log_dir + "/" + run_id + "/attempt_" + std::to_string(restart_count);
}

bool relays_console(const LaunchOptions& o) {
  return !o.log_dir.empty() || selection_given(o.redirects) || selection_given(o.tee) ||
         o.local_ranks_filter.has_value();
}

WorkerRoutes plan_routes(const LaunchOptions& o, int local_rank, const std::string& worker_log_dir) {
  int redirect = o.redirects.for_rank(local_rank);
  int tee = o.tee.for_rank(local_rank);
  if (!o.log_dir.empty() && !selection_given(o.redirects) && !selection_given(o.tee)) tee = 3;
  const bool relay = relays_console(o);
  const bool shown = !o.local_ranks_filter || o.local_ranks_filter->count(local_rank) > 0;
  auto route = [&](int bit, const char* name) {
    StreamRoute r;
    if ((redirect | tee) & bit) r.file = worker_log_dir + "/" + name;
    r.console = shown && (!(redirect & bit) || (tee & bit));
    // The launcher relays when it must prefix the console or copy to a file as well.
    r.relay = r.console && (relay || !r.file.empty());
    return r;
  };
  return WorkerRoutes{route(kOut, "stdout.log"), route(kErr, "stderr.log")};
}

OutputRelay::OutputRelay(Fd pipe_read, Fd file, ConsoleSink* console, std::string prefix)
    : pipe_(std::move(pipe_read)), file_(std::move(file)), console_(console), prefix_(std::move(prefix)) {
  int flags = ::fcntl(pipe_.get(), F_GETFL);
  if (flags < 0 || ::fcntl(pipe_.get(), F_SETFL, flags | O_NONBLOCK) < 0) {
    DDP_THROW_ERRNO("fcntl(O_NONBLOCK) on a worker output pipe");
  }
}

OutputRelay::~OutputRelay() = default;

bool OutputRelay::pump() {
  char buf[65536];
  while (pipe_.valid()) {
    ssize_t n = ::read(pipe_.get(), buf, sizeof buf);
    if (n > 0) {
      if (file_.valid()) write_all(file_.get(), buf, static_cast<size_t>(n));
      if (console_ != nullptr) {
        pending_.append(buf, static_cast<size_t>(n));
        emit_lines(false);
      }
      if (static_cast<size_t>(n) < sizeof buf) return true;  // likely drained; epoll says more
    } else if (n < 0 && errno == EINTR) {
      continue;
    } else if (n < 0 && errno == EAGAIN) {
      return true;
    } else {
      // EOF (or a read error, treated alike: the worker's end is gone).
      emit_lines(true);
      pipe_.reset();
      return false;
    }
  }
  return false;
}

void OutputRelay::finish() {
  while (pump()) {
    // pump returns true on EAGAIN: with every writer dead, nothing more will come.
    if (pipe_.valid()) {
      emit_lines(true);
      pipe_.reset();
    }
  }
}

void OutputRelay::emit_lines(bool flush_partial) {
  std::string out;
  size_t start = 0;
  while (true) {
    size_t nl = pending_.find('\n', start);
    if (nl == std::string::npos) {
      // A line longer than kMaxLine is cut rather than held without bound.
      if (pending_.size() - start < kMaxLine && !(flush_partial && start < pending_.size())) break;
      nl = std::min(pending_.size(), start + kMaxLine) - 1;
      out += prefix_;
      out.append(pending_, start, nl + 1 - start);
      out += '\n';
      start = nl + 1;
      continue;
    }
    out += prefix_;
    out.append(pending_, start, nl + 1 - start);
    start = nl + 1;
  }
  pending_.erase(0, start);
  if (!out.empty()) console_->write(out);
}

Fd open_log_file(const std::string& path) {
  // O_EXCL: the file is new, in a directory this launcher just made, so it truncates nothing of
  // anyone's; O_NOFOLLOW: a symlink planted at the path is refused, not followed.
  Fd fd(::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC | O_APPEND, 0640));
  if (!fd && errno == EEXIST) {
    DDP_THROW_ERRNO("open log file ", path,
                    ": it exists already (a log file is always new; is another launcher ",
                    "writing this directory?)");
  }
  if (!fd) DDP_THROW_ERRNO("open log file ", path);
  return fd;
}

void make_dirs(const std::string& path) {
  std::string partial;
  size_t pos = 0;
  while (pos != std::string::npos) {
    pos = path.find('/', pos + 1);
    partial = path.substr(0, pos);
    if (partial.empty()) continue;
    if (::mkdir(partial.c_str(), 0750) != 0 && errno != EEXIST) DDP_THROW_ERRNO("mkdir ", partial);
  }
}

void make_worker_dir(const std::string& root, const std::string& worker_dir) {
  DDP_CHECK(worker_dir.starts_with(root + "/"), "worker dir ", worker_dir, " is not under ", root);
  make_dirs(root);
  // Below the root every directory is ours: made here, or (the run and attempt levels, shared by
  // the ranks and by nodes on a shared file system) a real directory, never a symlink.
  size_t pos = root.size();
  while (true) {
    pos = worker_dir.find('/', pos + 1);
    const std::string partial = worker_dir.substr(0, pos);
    const bool last = pos == std::string::npos;
    if (::mkdir(partial.c_str(), 0750) == 0) {
      if (last) return;
      continue;
    }
    if (errno != EEXIST) DDP_THROW_ERRNO("mkdir ", partial);
    if (last) {
      DDP_THROW_ERRNO("log directory ", partial,
                      " exists already: a job with the same run id wrote logs here ",
                      "(use a new --rdzv-id per job, or another --log-dir)");
    }
    struct stat st {};
    if (::lstat(partial.c_str(), &st) != 0) DDP_THROW_ERRNO("lstat ", partial);
    if (!S_ISDIR(st.st_mode)) {
      errno = ENOTDIR;
      DDP_THROW_ERRNO("log directory ", partial, " is not a directory (a symlink or a file: refused)");
    }
  }
}

}  // namespace ddp::launcher
