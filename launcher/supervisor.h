#pragma once
// Supervisor: runs one attempt of a node's workers and watches them until all succeed, one
// fails, a handled signal arrives, or the caller asks it to stop.
// - Each worker: its own session and process group, PR_SET_PDEATHSIG(SIGKILL). One event loop
//   (signalfd, epoll, timerfd) and one reaper, waitpid(-1): as a subreaper the launcher reaps
//   orphaned grandchildren too, and at the end of run() SIGKILLs and reaps every descendant
//   still alive, removing the shm segments the dead left (common/shm_names.h).
// - Signals: forwarded to every worker's group; a second SIGINT escalates to SIGKILL. On the
//   first failure the rest get SIGTERM, then SIGKILL after shutdown_timeout. Between runs they
//   stay blocked and queued (poll_signal()); one left queued stops the next run() at once.
// - One per launcher, constructed before any thread starts (it blocks the signals process-wide);
//   run() from a thread that outlives the workers (PDEATHSIG follows the forking thread); no
//   children besides workers. Error files and logs per attempt: docs/launcher.md, log_router.h.
#include <sys/types.h>

#include <functional>
#include <memory>
#include <nlohmann/json_fwd.hpp>
#include <optional>
#include <string>
#include <vector>

#include "launcher/launch_options.h"
#include "rendezvous/node_rendezvous.h"

namespace ddp::launcher {

struct WorkerFailure {
  int rank = -1;
  int local_rank = -1;
  std::string host;
  pid_t pid = -1;
  int exit_code = 0;       // valid when signal == 0
  int signal = 0;          // death by signal
  double time = 0;         // seconds since the epoch
  std::string error_head;  // head of TORCHELASTIC_ERROR_FILE, if the worker wrote one
  std::string error_file;  // its path (whether or not the worker wrote it)
  std::string message;     // the launcher's own finding, e.g. "exec ./nope: No such file or directory"
};

struct AttemptResult {
  bool success = false;
  int interrupted_by = 0;               // signal that stopped the job (user or scheduler), else 0
  std::vector<WorkerFailure> failures;  // earliest first: failures[0] is the root cause
  bool stopped_externally = false;      // AttemptOptions::external_stop asked for the stop
  int exit_code() const;                // 0, the root cause's code, 128+N, 130 for SIGINT;
                                        // 1 when stopped externally with no failure here
};

struct AttemptOptions {
  int restart_count = 0;  // TORCHELASTIC_RESTART_COUNT
  int round = -1;         // names the attempt's log directory (attempt_<round>); -1: restart_count
  int dir_index() const { return round >= 0 ? round : restart_count; }
  // Polled every monitor_interval; true stops the workers (another node failed, say).
  std::function<bool()> external_stop;  // may also move the workers to a later round in place
                                        // (the assignment given to run() then changes)
  // How often external_stop is polled; unset: LaunchOptions::monitor_interval. A caller told of
  // its events through wake_monitor() needs only a slow tick, as a safety net: each tick of
  // hundreds of launchers on one host costs CPU.
  std::optional<Millis> monitor_interval;
};

class Supervisor {
 public:
  explicit Supervisor(const LaunchOptions& options);
  ~Supervisor();
  Supervisor(const Supervisor&) = delete;
  Supervisor& operator=(const Supervisor&) = delete;

  AttemptResult run(const rdzv::NodeAssignment& assignment, const AttemptOptions& attempt);

  // Takes one queued handled signal without waiting: its number, or 0 when none is queued.
  // For the caller's own waits between attempts (a Ctrl-C during rendezvous, say).
  int poll_signal();
  // The signalfd of the handled signals (readable when one is queued), for the caller's own
  // poll/epoll; read it through poll_signal().
  int signal_fd() const;
  // Thread-safe: the running attempt polls its external_stop now, not at the next
  // monitor_interval tick (the heartbeat found a peer lost). Between attempts: at the next's start.
  void wake_monitor();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// torchrun-like summary of a failed attempt (the cli prints it): every failure with time, host,
// rank, local rank, exit code or signal name, pid, error file and its head; the root cause
// last, marked as such. `program` names the job (the command's first word).
std::string format_failure_summary(const AttemptResult& result, const std::string& program);

// The same as JSON, for the event log (launcher/event_log.h; schema in docs/launcher.md):
// {"outcome": "succeeded"|"failed"|"interrupted"|"stopped", "exit_code", "interrupted_by",
//  "failures": [root cause first: {"rank", "local_rank", "host", "pid", "exit_code" | "signal",
//  "time", "error_file", "error", "message"}]}.
nlohmann::ordered_json attempt_json(const AttemptResult& result);

// "SIGKILL" for 9, "SIG42" for a number without a name.
std::string signal_name(int signal);

}  // namespace ddp::launcher
