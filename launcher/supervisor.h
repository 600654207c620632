#pragma once
// Supervisor: runs one attempt of a node's workers and watches them until all succeed, one
// fails, a handled signal arrives, or the caller asks it to stop.
//
// - Each worker runs in its own process group with PR_SET_PDEATHSIG(SIGKILL); exactly one
//   reaper; an event loop (signalfd + pidfd + epoll), no polling sleeps.
// - Handled signals are forwarded to every worker's process group; a second SIGINT escalates
//   to SIGKILL. On the first failure the rest get SIGTERM, then SIGKILL after shutdown_timeout.
// - Construct once per launcher: it blocks the handled signals for the whole process.
#include <sys/types.h>

#include <functional>
#include <memory>
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
  int exit_code = 0;         // valid when signal == 0
  int signal = 0;            // death by signal
  double time = 0;           // seconds since the epoch
  std::string error_head;    // head of TORCHELASTIC_ERROR_FILE, if the worker wrote one
};

struct AttemptResult {
  bool success = false;
  int interrupted_by = 0;               // signal that stopped the job (user or scheduler), else 0
  std::vector<WorkerFailure> failures;  // earliest first: failures[0] is the root cause
  int exit_code() const;                // 0, the root cause's code, 128+N, 130 for SIGINT
};

struct AttemptOptions {
  int restart_count = 0;
  // Polled every monitor_interval; true stops the workers (another node failed, say).
  std::function<bool()> external_stop;
};

class Supervisor {
 public:
  explicit Supervisor(const LaunchOptions& options);
  ~Supervisor();
  Supervisor(const Supervisor&) = delete;
  Supervisor& operator=(const Supervisor&) = delete;

  AttemptResult run(const rdzv::NodeAssignment& assignment, const AttemptOptions& attempt);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace ddp::launcher
