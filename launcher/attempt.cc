#include "launcher/attempt.h"

#include <errno.h>
#include <fcntl.h>
#include <sys/epoll.h>
#include <sys/signalfd.h>
#include <sys/timerfd.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>

#include "common/error.h"
#include "common/log.h"
#include "common/shm_names.h"
#include "launcher/error_file.h"
#include "launcher/event_log.h"
#include "launcher/line_prefix.h"
#include "launcher/process_tree.h"
#include "launcher/spawn.h"
#include "launcher/worker_env.h"

extern char** environ;

namespace ddp::launcher {
namespace {

double now_epoch() {
  using namespace std::chrono;
  return duration<double>(system_clock::now().time_since_epoch()).count();
}

std::pair<Fd, Fd> make_pipe(const char* what) {
  int fds[2];
  if (::pipe2(fds, O_CLOEXEC) != 0) DDP_THROW_ERRNO("pipe2 for ", what);
  return {Fd(fds[0]), Fd(fds[1])};
}

}  // namespace

Attempt::Attempt(SupervisorState& state, const rdzv::NodeAssignment& assignment,
                 const AttemptOptions& attempt)
    : state_(state), assignment_(assignment), attempt_(attempt) {
  DDP_CHECK(assignment.local_world_size >= 1, "a node needs at least one worker");
  run_id_ = effective_run_id(state.options, assignment);
  exec_path_ = resolve_executable(state.options.command.front());
}

Attempt::~Attempt() {
  if (done_) return;
  // Exceptional exit: nothing of this attempt may survive it.
  signal_groups(SIGKILL);
  kill_all_descendants();
  set_timer(state_.monitor_timer.get(), Millis(0), Millis(0));
  set_timer(state_.grace_timer.get(), Millis(0), Millis(0));
}

void Attempt::start() {
  workers_.reserve(static_cast<size_t>(assignment_.local_world_size));
  for (int lr = 0; lr < assignment_.local_world_size; ++lr) spawn_worker(lr);
  if (attempt_.monitor_interval && attempt_.monitor_interval->count() > 0)
    set_timer(state_.monitor_timer.get(), *attempt_.monitor_interval, *attempt_.monitor_interval);
}

std::string Attempt::prefix_for(const Worker& worker, int console_fd) const {
  LinePrefixOptions p;
  p.template_text = state_.options.log_line_prefix_template;
  p.role = state_.options.role;
  p.rank = worker.rank;
  p.local_rank = worker.local_rank;
  p.colour = colour_wanted(console_fd);
  return line_prefix(p);
}

void Attempt::spawn_worker(int local_rank) {
  const LaunchOptions& o = state_.options;
  Worker w;
  w.local_rank = local_rank;
  w.rank = assignment_.rank_offset + local_rank;
  const std::string rank = std::to_string(w.rank);

  // Files: the user's log dir, else our private dir (error files, and logs only when
  // --redirects/--tee asked for files without a log dir: then the dir is kept).
  const bool user_logs = !o.log_dir.empty();
  std::string root = user_logs ? o.log_dir : state_.private_dir(run_id_);
  const std::string run_dir = user_logs && !o.log_run_dir.empty() ? o.log_run_dir : run_id_;
  std::string worker_dir = attempt_log_dir(root, run_dir, attempt_.dir_index()) + "/" + rank;
  WorkerRoutes routes = plan_routes(o, local_rank, worker_dir);
  if (user_logs) {
    make_worker_dir(root, worker_dir);
    w.error_file = worker_dir + "/error.json";
  } else {
    w.error_file =
        root + "/attempt_" + std::to_string(attempt_.dir_index()) + "_rank_" + rank + "_error.json";
    if (!routes.out.file.empty() || !routes.err.file.empty()) {
      make_worker_dir(root, worker_dir);
      if (!state_.keep_temp_dir) {
        logger("launcher")->info("--redirects/--tee without --log-dir: worker logs go to {}", root);
      }
      state_.keep_temp_dir = true;
    }
  }
  ::unlink(w.error_file.c_str());  // a stale file from an earlier job must not be blamed

  SpawnOptions spawn;
  spawn.path = exec_path_;
  spawn.argv = o.command;
  spawn.env =
      merge_environ(environ, worker_env(o, assignment_, {local_rank, attempt_.restart_count, w.error_file}));
  spawn.sigmask = state_.original_mask;
  const auto& cpus = state_.cpus_for(assignment_.local_world_size);
  if (!cpus.empty()) spawn.cpus = to_cpu_set(cpus[static_cast<size_t>(local_rank)]);
  if (!cpus.empty() && o.numa_memory)
    spawn.preferred_numa_node = numa_node_of(cpus[static_cast<size_t>(local_rank)]);

  // Child-side descriptors live until the fork is done, then close here.
  Fd child_out = wire_stream(routes.out, STDOUT_FILENO, w);
  Fd child_err = wire_stream(routes.err, STDERR_FILENO, w);
  spawn.stdout_fd = child_out.get();  // -1: inherit the launcher's
  spawn.stderr_fd = child_err.get();

  Spawned child = spawn_process(spawn);
  w.pid = child.pid;
  w.alive = true;
  w.exec_status = std::move(child.exec_status);
  w.started = now_epoch();
  ++alive_;
  emit_event("worker_start", {{"rank", w.rank}, {"local_rank", local_rank}, {"pid", w.pid}});
  workers_.push_back(std::move(w));
}

Fd Attempt::wire_stream(const StreamRoute& route, int console_fd, const Worker& worker) {
  if (route.relay) {
    auto [read_end, write_end] = make_pipe("worker output");
    Fd file = route.file.empty() ? Fd() : open_log_file(route.file);
    auto& sink = state_.consoles[console_fd == STDOUT_FILENO ? 0 : 1];
    if (route.console && !sink)
      sink = std::make_unique<ConsoleSink>(console_fd, console_fd == STDOUT_FILENO ? "stdout" : "stderr");
    relays_.push_back(std::make_unique<OutputRelay>(std::move(read_end), std::move(file),
                                                    route.console ? sink.get() : nullptr,
                                                    prefix_for(worker, console_fd)));
    epoll_event ev{};
    ev.events = EPOLLIN;
    ev.data.u64 = kTagRelay + relays_.size() - 1;
    if (::epoll_ctl(state_.epoll.get(), EPOLL_CTL_ADD, relays_.back()->fd(), &ev) != 0) {
      DDP_THROW_ERRNO("epoll_ctl(ADD) for a worker output pipe");
    }
    return std::move(write_end);
  }
  if (!route.file.empty()) return open_log_file(route.file);
  if (!route.console) {
    Fd null(::open("/dev/null", O_WRONLY | O_CLOEXEC));
    if (!null) DDP_THROW_ERRNO("open /dev/null");
    return null;
  }
  return Fd();  // inherit
}

SupervisorEvent Attempt::next() {
  epoll_event events[32];
  while (alive_ > 0) {
    int n = ::epoll_wait(state_.epoll.get(), events, 32, -1);
    if (n < 0) {
      if (errno == EINTR) continue;
      DDP_THROW_ERRNO("epoll_wait in the supervisor loop");
    }
    for (int i = 0; i < n; ++i) dispatch(events[i].data.u64);
    watch_consoles();
    if (ticked_ && alive_ > 0) {
      ticked_ = false;
      return SupervisorEvent::kTick;
    }
  }
  if (done_) return SupervisorEvent::kExited;
  // Every worker is gone: now anything they left behind goes, then their output drains.
  std::vector<pid_t> reaped;
  kill_all_descendants(&reaped);
  shm_names::remove_tcp_segments(reaped);
  finish_output();
  set_timer(state_.monitor_timer.get(), Millis(0), Millis(0));
  set_timer(state_.grace_timer.get(), Millis(0), Millis(0));
  done_ = true;
  result_.success = result_.failures.empty() && result_.interrupted_by == 0 && !result_.stopped_externally;
  return SupervisorEvent::kExited;
}

void Attempt::stop() {
  if (phase_ != Phase::kRunning) return;
  result_.stopped_externally = true;
  begin_stop(SIGTERM);
}

void Attempt::moved(const rdzv::NodeAssignment& assignment) {
  assignment_ = assignment;
  for (auto& w : workers_) w.rank = assignment_.rank_offset + w.local_rank;
}

void Attempt::dispatch(uint64_t tag) {
  if (tag == kTagSignal) {
    signalfd_siginfo info;
    while (::read(state_.signal_fd.get(), &info, sizeof info) == sizeof info) {
      on_signal(static_cast<int>(info.ssi_signo));
    }
  } else if (tag == kTagMonitor || tag == kTagWake) {
    uint64_t ticks;
    const int fd = tag == kTagMonitor ? state_.monitor_timer.get() : state_.wake.get();
    if (::read(fd, &ticks, sizeof ticks) < 0) return;
    if (phase_ == Phase::kRunning) ticked_ = true;
  } else if (tag == kTagGrace) {
    uint64_t ticks;
    if (::read(state_.grace_timer.get(), &ticks, sizeof ticks) < 0) return;
    logger("launcher")
        ->warn("workers still running {} ms after the stop signal: sending SIGKILL",
               state_.options.shutdown_timeout.count());
    signal_groups(SIGKILL);
  } else if (tag < kTagRelay) {
    if (auto& sink = state_.consoles[tag - kTagConsole]) sink->flush();
  } else {
    OutputRelay& relay = *relays_[tag - kTagRelay];
    if (relay.open()) relay.pump();  // at EOF it closes its pipe, which leaves the epoll set
  }
}

void Attempt::on_signal(int sig) {
  if (sig == SIGCHLD) {
    reap();
    return;
  }
  if (sig == SIGINT && ++sigints_ >= 2) {
    // The user insists: no more grace.
    logger("launcher")->warn("second SIGINT: killing the workers");
    signal_groups(SIGKILL);
    return;
  }
  if (result_.interrupted_by == 0) result_.interrupted_by = sig;
  logger("launcher")->info("received {}: forwarding it to the workers", signal_name(sig));
  signal_groups(sig);
  if (phase_ == Phase::kRunning) {
    phase_ = Phase::kStopping;
    set_timer(state_.grace_timer.get(), state_.options.shutdown_timeout, Millis(0));
  }
}

void Attempt::reap() {
  const size_t known = result_.failures.size();
  std::vector<pid_t> reaped;
  while (true) {
    int status = 0;
    pid_t pid = ::waitpid(-1, &status, WNOHANG);
    if (pid < 0 && errno == EINTR) continue;
    if (pid <= 0) break;  // 0: none ready; ECHILD: no children at all
    reaped.push_back(pid);
    record_exit(pid, status);
  }
  const bool new_failure = result_.failures.size() > known;
  if (new_failure) reap_dying(&reaped);
  // waitpid's order within one batch is not the order of death. A worker killed by a signal
  // (SIGKILL, the OOM killer, a crash) goes before the ones that exited with an error in the same
  // instant: those errors are most often its consequence (peers that saw it go).
  std::stable_partition(result_.failures.begin() + static_cast<std::ptrdiff_t>(known), result_.failures.end(),
                        [](const WorkerFailure& f) { return f.signal != 0; });
  // A process killed while it set up a tcp group leaves its shm segment named: remove it.
  shm_names::remove_tcp_segments(reaped);
  if (new_failure) begin_stop(SIGTERM);
}

void Attempt::record_exit(pid_t pid, int status) {
  Worker* w = nullptr;
  for (auto& candidate : workers_) {
    if (candidate.pid == pid && candidate.alive) w = &candidate;
  }
  if (w == nullptr) return;  // an orphaned grandchild re-parented to us: reaped, done
  w->alive = false;
  --alive_;
  if (event_log_enabled()) {
    emit_event("worker_exit",
               {{"rank", w->rank},
                {"local_rank", w->local_rank},
                {"pid", w->pid},
                {"exit_code", WIFEXITED(status) ? nlohmann::ordered_json(WEXITSTATUS(status)) : nullptr},
                {"signal", WIFSIGNALED(status) ? nlohmann::ordered_json(signal_name(WTERMSIG(status)))
                                               : nlohmann::ordered_json()},
                {"seconds", now_epoch() - w->started},
                {"while_stopping", phase_ == Phase::kStopping}});
  }
  if (WIFEXITED(status) && WEXITSTATUS(status) == 0) return;
  // Failures after the stop began are its consequences, not causes.
  if (phase_ == Phase::kRunning) result_.failures.push_back(describe_failure(*w, status));
}

void Attempt::reap_dying(std::vector<pid_t>* reaped) {
  // A worker SIGKILLed closes its sockets before it becomes reapable: a peer can see it go, fail
  // and be reaped first. Such a worker is already exiting (the kernel flags it before it closes
  // its files), so it joins this batch, and the ordering above can put the cause first.
  if (phase_ != Phase::kRunning) return;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(2);
  for (auto& w : workers_) {
    if (!w.alive || !is_exiting(w.pid)) continue;
    int status = 0;
    pid_t got = 0;
    while ((got = ::waitpid(w.pid, &status, WNOHANG)) == 0 && std::chrono::steady_clock::now() < deadline) {
      ::usleep(1000);
    }
    if (got != w.pid) continue;  // still exiting at the deadline: reaped by the loop later
    reaped->push_back(got);
    record_exit(got, status);
  }
}

WorkerFailure Attempt::describe_failure(Worker& w, int status) const {
  WorkerFailure f;
  f.rank = w.rank;
  f.local_rank = w.local_rank;
  f.host = state_.host;
  f.pid = w.pid;
  f.time = now_epoch();
  f.error_file = w.error_file;
  if (WIFSIGNALED(status)) {
    f.signal = WTERMSIG(status);
  } else {
    f.exit_code = WEXITSTATUS(status);
    if (f.exit_code == 126 || f.exit_code == 127) {
      if (auto err = read_exec_error(w.exec_status.get(), state_.options.command.front())) f.message = *err;
    }
  }
  if (auto content = read_error_file(w.error_file)) f.error_head = error_head(*content);
  return f;
}

void Attempt::begin_stop(int sig) {
  if (phase_ == Phase::kStopping) return;
  phase_ = Phase::kStopping;
  if (state_.options.shutdown_timeout.count() <= 0) {
    signal_groups(SIGKILL);
    return;
  }
  signal_groups(sig);
  // A stopped worker (SIGSTOP, a debugger, a fault) would not act on sig before the SIGKILL
  // escalation: wake it, as kill(1) and shells do for stopped jobs.
  signal_groups(SIGCONT);
  set_timer(state_.grace_timer.get(), state_.options.shutdown_timeout, Millis(0));
}

void Attempt::signal_groups(int sig) {
  // Every worker's group, also of workers already reaped: what they started may live on in
  // it. A group id is not reused while the group has members, so this cannot hit strangers.
  for (const auto& w : workers_) {
    if (w.pid > 0 && w.alive) {
      signal_worker(w.pid, sig);
    } else if (w.pid > 0) {
      ::kill(-w.pid, sig);  // reaped: only what is left in its group
    }
  }
}

void Attempt::set_timer(int fd, Millis first, Millis interval) {
  itimerspec spec{};
  auto to_ts = [](Millis ms) {
    timespec ts{};
    ts.tv_sec = static_cast<time_t>(ms.count() / 1000);
    ts.tv_nsec = static_cast<long>(ms.count() % 1000) * 1'000'000;
    return ts;
  };
  spec.it_value = to_ts(first);
  spec.it_interval = to_ts(interval);
  ::timerfd_settime(fd, 0, &spec, nullptr);
}

void Attempt::watch_consoles() {
  for (int i = 0; i < 2; ++i) {
    const auto& sink = state_.consoles[i];
    const bool want = sink && sink->pending() && sink->poll_fd() >= 0;
    if (want == state_.console_watched[i]) continue;
    epoll_event ev{};
    ev.events = EPOLLOUT;
    ev.data.u64 = kTagConsole + static_cast<uint64_t>(i);
    // A failure leaves the sink unwatched: its buffer still drains with the next output.
    if (::epoll_ctl(state_.epoll.get(), want ? EPOLL_CTL_ADD : EPOLL_CTL_DEL, sink->poll_fd(), &ev) == 0) {
      state_.console_watched[i] = want;
    }
  }
}

void Attempt::finish_output() {
  for (auto& relay : relays_) {
    if (relay->open()) relay->finish();
  }
  relays_.clear();
  // What a console has not taken yet goes now, unless it takes nothing for a while: a reader
  // that stopped must not keep the launcher (and the job's end) waiting forever.
  for (auto& sink : state_.consoles) {
    if (sink) sink->drain(kConsoleDrainStall);
  }
  watch_consoles();
}

}  // namespace ddp::launcher
