#pragma once
// Supervisor: runs one attempt of a node's workers at a time and reports its events to the
// owner (the RoundLoop), who decides: start(), then next() until kExited; between, stop() or moved().
// - Each worker: its own session and process group, PR_SET_PDEATHSIG(SIGKILL). One event loop
//   (signalfd, epoll, timerfd) and one reaper, waitpid(-1): as a subreaper the launcher reaps
//   orphaned grandchildren too, and once every worker exited it SIGKILLs and reaps every
//   descendant still alive, removing the shm segments the dead left (common/shm_names.h).
// - Signals: forwarded to every worker's group; a second SIGINT escalates to SIGKILL. On the
//   first failure the rest get SIGTERM, then SIGKILL after shutdown_timeout. Between attempts they
//   stay blocked and queued (poll_signal()); one left queued stops the next attempt at once.
// - One per launcher, constructed before any thread starts (it blocks the signals process-wide);
//   used from a thread that outlives the workers (PDEATHSIG follows the forking thread); no
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
  bool stopped_externally = false;      // the owner stopped the workers (Supervisor::stop)
  int exit_code() const;                // 0, the root cause's code, 128+N, 130 for SIGINT;
                                        // 1 when stopped externally with no failure here
};

struct AttemptOptions {
  int restart_count = 0;  // TORCHELASTIC_RESTART_COUNT
  int round = -1;         // names the attempt's log directory (attempt_<round>); -1: restart_count
  int dir_index() const { return round >= 0 ? round : restart_count; }
  // How often next() reports kTick while the workers run; unset: never (wake_monitor() still
  // does). An owner told of its events through wake_monitor() needs only a slow tick, as a safety
  // net: each tick of hundreds of launchers on one host costs CPU.
  std::optional<Millis> monitor_interval;
};

enum class SupervisorEvent {
  kTick,    // the monitor's tick or wake_monitor(), while the workers run: the owner's turn
  kExited,  // every worker is reaped: result() is the attempt's
};

class Supervisor {
 public:
  explicit Supervisor(const LaunchOptions& options);
  ~Supervisor();
  Supervisor(const Supervisor&) = delete;
  Supervisor& operator=(const Supervisor&) = delete;

  // Spawns the node's workers: a new attempt (an unfinished one is killed first).
  void start(const rdzv::NodeAssignment& assignment, const AttemptOptions& attempt);
  // Runs the attempt's event loop (signals, exits, output) until its next event.
  SupervisorEvent next();
  // Stops the workers (SIGTERM, then SIGKILL after shutdown_timeout); next() reports kExited.
  void stop();
  // The workers moved to a later round in place: failures name their ranks from `assignment`.
  void moved(const rdzv::NodeAssignment& assignment);
  bool stopping() const;   // a signal, a failure or stop() began to stop the workers
  AttemptResult result();  // after kExited: the attempt's result; the attempt ends
  void kill() noexcept;    // ends an unfinished attempt at once: SIGKILL, reaped; else nothing
  // start(), then next() until kExited, ticks ignored: an attempt nobody else looks at.
  AttemptResult run(const rdzv::NodeAssignment& assignment, const AttemptOptions& attempt);

  // Takes one queued handled signal without waiting: its number, or 0 when none is queued.
  // For the caller's own waits between attempts (a Ctrl-C during rendezvous, say).
  int poll_signal();
  // The signalfd of the handled signals (readable when one is queued), for the caller's own
  // poll/epoll; read it through poll_signal().
  int signal_fd() const;
  // Thread-safe: next() reports kTick now, not at the next monitor_interval tick (the heartbeat
  // found a peer lost). Between attempts: at the next one's first next().
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
