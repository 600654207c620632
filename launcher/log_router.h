#pragma once
// Where each worker's stdout and stderr go, and the relay that carries them when the launcher
// has to be in the middle. Routing is torchrun's --redirects/--tee, per local rank and stream:
// redirected to <worker log dir>/{stdout,stderr}.log only (the worker writes it: no relay), tee'd
// to the file and the console, else the console; --log-dir alone tees everything, and
// --local-ranks-filter drops the other ranks from the console. When the launcher relays the
// console (any of those flags), lines carry torchrun's "[<role><local rank>]:" prefix
// (line_prefix.h); with none, workers inherit its stdout/stderr: no pipes, a tty stays a tty.
// The relay writes whole lines only, each read's complete lines in one chunk to the ConsoleSink
// (never blocking: console_sink.h), so ranks never interleave mid-line; a partial line waits for
// its newline (or kMaxLine bytes, or the stream's end: flushed with a newline). Files get raw bytes.
#include <string>

#include "common/fd.h"
#include "launcher/console_sink.h"
#include "launcher/launch_options.h"

namespace ddp::launcher {

// torchrun's layout: <log_dir>/<run_id>/attempt_<n>; the worker's files under "<rank>/".
std::string attempt_log_dir(const std::string& log_dir, const std::string& run_id, int restart_count);

struct StreamRoute {
  std::string file;      // log file; empty: none
  bool console = false;  // shown on the launcher's console
  bool relay = false;    // through a pipe and the launcher (console with prefix, or tee)
};

struct WorkerRoutes {
  StreamRoute out;
  StreamRoute err;
};

// True when the launcher must sit between workers and the console (see above).
bool relays_console(const LaunchOptions& options);

// Routes for one worker; worker_log_dir is "<attempt dir>/<rank>" (where files go).
WorkerRoutes plan_routes(const LaunchOptions& options, int local_rank, const std::string& worker_log_dir);

// One relayed stream: pipe read end -> optional file, optional console with a line prefix.
class OutputRelay {
 public:
  static constexpr size_t kMaxLine = 64 * 1024;

  // console nullptr: no console (not owned; it outlives the relay); file invalid: no file.
  OutputRelay(Fd pipe_read, Fd file, ConsoleSink* console, std::string prefix);
  OutputRelay(const OutputRelay&) = delete;
  OutputRelay& operator=(const OutputRelay&) = delete;
  ~OutputRelay();

  int fd() const { return pipe_.get(); }
  bool open() const { return pipe_.valid(); }
  // Reads whatever is available (the pipe is non-blocking). Returns false once the stream
  // ended (EOF): the pipe is closed and the partial line flushed.
  bool pump();
  // Drains what is left without waiting, then flushes and closes (all writers are gone).
  void finish();

 private:
  void emit_lines(bool flush_partial);

  Fd pipe_;
  Fd file_;
  ConsoleSink* console_;
  std::string prefix_;
  std::string pending_;  // bytes after the last newline
};

// Creates a log file for a worker to write (0640): a new file only (O_EXCL, so nothing of
// anyone's is truncated), never through a symlink (O_NOFOLLOW). Throws SystemError.
Fd open_log_file(const std::string& path);

// mkdir -p (0750 for what it creates). Throws SystemError naming the directory.
void make_dirs(const std::string& path);

// A worker's log directory "<root>/<run_id>/attempt_<n>/<rank>": root made like mkdir -p; the
// levels below it may exist (other ranks, other nodes) but must be real directories, not
// symlinks; the rank directory itself must be new — an existing one means another job with the
// same run id wrote there, refused with a SystemError saying so.
void make_worker_dir(const std::string& root, const std::string& worker_dir);

}  // namespace ddp::launcher
