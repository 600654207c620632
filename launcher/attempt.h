#pragma once
// Internal to the supervisor: the launcher-wide state (signals, epoll, timers, temp dir) and
// one attempt's event loop. See launcher/supervisor.h for the contract.
#include <signal.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "common/fd.h"
#include "launcher/console_sink.h"
#include "launcher/cpu_bind.h"
#include "launcher/log_router.h"
#include "launcher/supervisor.h"

namespace ddp::launcher {

inline constexpr uint64_t kTagSignal = 0;
inline constexpr uint64_t kTagMonitor = 1;
inline constexpr uint64_t kTagGrace = 2;
inline constexpr uint64_t kTagWake = 3;     // Supervisor::wake_monitor: poll the monitor now
inline constexpr uint64_t kTagConsole = 4;  // + 0 stdout, + 1 stderr: room to write again
inline constexpr uint64_t kTagRelay = 6;    // + relay index

// Lives as long as the Supervisor.
struct SupervisorState {
  explicit SupervisorState(const LaunchOptions& options);
  ~SupervisorState();
  SupervisorState(const SupervisorState&) = delete;
  SupervisorState& operator=(const SupervisorState&) = delete;

  // A private directory for error files (and logs without --log-dir), made on first use.
  const std::string& private_dir(const std::string& run_id);
  const std::vector<std::vector<int>>& cpus_for(int local_world_size);

  LaunchOptions options;
  std::vector<int> signals;
  sigset_t handled{};        // the handled signals and SIGCHLD
  sigset_t original_mask{};  // restored in workers and at destruction
  struct sigaction old_sigchld {};
  struct sigaction old_sigpipe {};
  int was_subreaper = 0;
  Fd signal_fd;
  Fd epoll;
  Fd monitor_timer;
  Fd wake;  // an eventfd: written by wake_monitor (any thread)
  Fd grace_timer;
  std::string host;
  std::string temp_dir;
  bool keep_temp_dir = false;  // it holds log files the user asked for
  std::vector<std::vector<int>> cpus;
  int cpus_world_size = -1;
  // The launcher's stdout and stderr when it relays worker output (else null); never block.
  std::unique_ptr<ConsoleSink> consoles[2];
  bool console_watched[2] = {false, false};  // in the epoll set for EPOLLOUT
};

// One run of the node's workers. The destructor kills and reaps whatever is left, so an
// exception anywhere (a fork that fails half-way) never leaks a process.
class Attempt {
 public:
  Attempt(SupervisorState& state, const rdzv::NodeAssignment& assignment, const AttemptOptions& attempt);
  ~Attempt();
  Attempt(const Attempt&) = delete;
  Attempt& operator=(const Attempt&) = delete;

  void start();            // spawns every worker
  SupervisorEvent next();  // the event loop, until a tick (while running) or every worker is reaped
  void stop();             // the owner's stop: SIGTERM, then SIGKILL after the grace
  void moved(const rdzv::NodeAssignment& assignment);
  bool stopping() const { return phase_ == Phase::kStopping; }
  bool done() const { return done_; }
  AttemptResult take_result() { return std::move(result_); }

 private:
  struct Worker {
    int local_rank = 0;
    int rank = 0;
    pid_t pid = -1;
    bool alive = false;
    Fd exec_status;
    std::string error_file;
    double started = 0;  // seconds since the epoch
  };

  void spawn_worker(int local_rank);
  // The descriptor a worker's stream gets (invalid: inherit), setting up its relay if any.
  Fd wire_stream(const StreamRoute& route, int console_fd, const Worker& worker);
  std::string prefix_for(const Worker& worker, int console_fd) const;  // launcher/line_prefix.h
  void dispatch(uint64_t tag);  // sets ticked_ on a monitor tick or wake while running
  void on_signal(int sig);
  void reap();
  void record_exit(pid_t pid, int status);  // a worker's exit: a failure while running
  void reap_dying(std::vector<pid_t>* reaped);
  WorkerFailure describe_failure(Worker& w, int status) const;
  void begin_stop(int sig);
  void signal_groups(int sig);
  void set_timer(int fd, Millis first, Millis interval);
  // Watches a console for room (EPOLLOUT) exactly while it holds buffered output.
  void watch_consoles();
  void finish_output();

  enum class Phase { kRunning, kStopping };

  SupervisorState& state_;
  rdzv::NodeAssignment assignment_;
  AttemptOptions attempt_;
  std::string run_id_;
  std::string exec_path_;
  std::vector<Worker> workers_;
  std::vector<std::unique_ptr<OutputRelay>> relays_;
  int alive_ = 0;
  int sigints_ = 0;
  Phase phase_ = Phase::kRunning;
  AttemptResult result_;
  bool done_ = false;
  bool ticked_ = false;
};

}  // namespace ddp::launcher
