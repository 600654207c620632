#include "launcher/supervisor.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/prctl.h>
#include <sys/signalfd.h>
#include <sys/timerfd.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>

#include "common/error.h"
#include "common/log.h"
#include "common/settings.h"
#include "launcher/attempt.h"
#include "launcher/process_tree.h"
#include "launcher/stderr_sink.h"

namespace ddp::launcher {

int AttemptResult::exit_code() const {
  if (success) return 0;
  if (interrupted_by != 0) return 128 + interrupted_by;
  if (!failures.empty()) {
    const WorkerFailure& root = failures.front();
    return root.signal != 0 ? 128 + root.signal : root.exit_code;
  }
  return 1;
}

namespace {

const std::vector<int> kDefaultSignals = {SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGUSR1, SIGUSR2};

Fd make_timer() {
  Fd fd(::timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK | TFD_CLOEXEC));
  if (!fd) DDP_THROW_ERRNO("timerfd_create");
  return fd;
}

void watch(int epoll_fd, int fd, uint64_t tag) {
  epoll_event ev{};
  ev.events = EPOLLIN;
  ev.data.u64 = tag;
  if (::epoll_ctl(epoll_fd, EPOLL_CTL_ADD, fd, &ev) != 0) DDP_THROW_ERRNO("epoll_ctl(ADD)");
}

std::string sanitize(const std::string& s) {
  std::string out;
  for (char c : s) out += (std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '.') ? c : '_';
  return out.substr(0, 64);
}

}  // namespace

SupervisorState::SupervisorState(const LaunchOptions& opts) : options(opts) {
  DDP_CHECK(!options.command.empty(), "the launcher needs a program to run");
  signals = options.signals_to_handle.empty() ? kDefaultSignals : options.signals_to_handle;
  sigemptyset(&handled);
  for (int sig : signals) {
    DDP_CHECK(sig > 0 && sig < NSIG && sig != SIGKILL && sig != SIGSTOP && sig != SIGCHLD, "signal ", sig,
              " cannot be handled");
    sigaddset(&handled, sig);
  }
  sigaddset(&handled, SIGCHLD);
  // A SIGCHLD set to SIG_IGN makes the kernel reap children itself: the one reaper must be us.
  struct sigaction dfl {};
  dfl.sa_handler = SIG_DFL;
  ::sigaction(SIGCHLD, &dfl, &old_sigchld);
  // A console that went away (ddp-launch ... | head) must not kill the launcher mid-job: the
  // relays drop the output instead (workers get SIGPIPE's default back before exec).
  struct sigaction ign {};
  ign.sa_handler = SIG_IGN;
  ::sigaction(SIGPIPE, &ign, &old_sigpipe);
  if (int rc = ::pthread_sigmask(SIG_BLOCK, &handled, &original_mask); rc != 0) {
    errno = rc;
    DDP_THROW_ERRNO("pthread_sigmask(SIG_BLOCK) for the launcher's signals");
  }
  signal_fd = Fd(::signalfd(-1, &handled, SFD_NONBLOCK | SFD_CLOEXEC));
  if (!signal_fd) DDP_THROW_ERRNO("signalfd");
  epoll = Fd(::epoll_create1(EPOLL_CLOEXEC));
  if (!epoll) DDP_THROW_ERRNO("epoll_create1");
  monitor_timer = make_timer();
  wake = Fd(::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC));
  if (!wake) DDP_THROW_ERRNO("eventfd");
  grace_timer = make_timer();
  watch(epoll.get(), signal_fd.get(), kTagSignal);
  watch(epoll.get(), monitor_timer.get(), kTagMonitor);
  watch(epoll.get(), wake.get(), kTagWake);
  watch(epoll.get(), grace_timer.get(), kTagGrace);
  ::prctl(PR_GET_CHILD_SUBREAPER, &was_subreaper);
  become_subreaper();
  char name[256] = {};
  ::gethostname(name, sizeof name - 1);
  host = name;
}

SupervisorState::~SupervisorState() {
  // Said once, at the end: how much worker output a console that did not read cost.
  for (auto& sink : consoles) {
    if (!sink || sink->dropped() == 0) continue;
    const std::string line = sink->dropped_message();
    if (consoles[1]) {
      consoles[1]->write(line);
      consoles[1]->drain(kConsoleDrainStall);
    } else {
      write_stderr(line);  // never blocks (stderr_sink.h)
    }
  }
  // Drop queued signals before unblocking them: their default action would kill us now.
  signalfd_siginfo info;
  while (signal_fd && ::read(signal_fd.get(), &info, sizeof info) == sizeof info) {
  }
  ::pthread_sigmask(SIG_SETMASK, &original_mask, nullptr);
  ::sigaction(SIGCHLD, &old_sigchld, nullptr);
  ::sigaction(SIGPIPE, &old_sigpipe, nullptr);
  ::prctl(PR_SET_CHILD_SUBREAPER, was_subreaper);
  if (!temp_dir.empty() && !keep_temp_dir) {
    std::error_code ec;
    std::filesystem::remove_all(temp_dir, ec);
  }
}

const std::string& SupervisorState::private_dir(const std::string& run_id) {
  if (temp_dir.empty()) {
    std::string pattern = settings::get_or(settings::kTmpdir, std::string(settings::kTmpdir.fallback)) +
                          "/ddp-launch-" + sanitize(run_id) + "-XXXXXX";
    if (::mkdtemp(pattern.data()) == nullptr) DDP_THROW_ERRNO("mkdtemp ", pattern);
    temp_dir = pattern;
  }
  return temp_dir;
}

const std::vector<std::vector<int>>& SupervisorState::cpus_for(int local_world_size) {
  if (cpus_world_size != local_world_size) {
    cpus = cpu_assignment(options.cpu_bind, local_world_size);
    cpus_world_size = local_world_size;
  }
  return cpus;
}

struct Supervisor::Impl {
  explicit Impl(const LaunchOptions& options) : state(options) {}
  Attempt& current() const;
  SupervisorState state;
  std::unique_ptr<Attempt> attempt;  // after `state`, which it uses: destroyed first
};

Supervisor::Supervisor(const LaunchOptions& options) : impl_(std::make_unique<Impl>(options)) {}

Supervisor::~Supervisor() = default;

void Supervisor::start(const rdzv::NodeAssignment& assignment, const AttemptOptions& attempt) {
  impl_->attempt.reset();  // an unfinished one: its workers killed, reaped
  impl_->attempt = std::make_unique<Attempt>(impl_->state, assignment, attempt);
  impl_->attempt->start();
}

Attempt& Supervisor::Impl::current() const {
  DDP_CHECK(attempt != nullptr, "the supervisor has no attempt: start() one");
  return *attempt;
}

SupervisorEvent Supervisor::next() { return impl_->current().next(); }

void Supervisor::stop() { impl_->current().stop(); }

void Supervisor::moved(const rdzv::NodeAssignment& assignment) { impl_->current().moved(assignment); }

bool Supervisor::stopping() const { return impl_->current().stopping(); }

AttemptResult Supervisor::result() {
  Attempt& a = impl_->current();
  DDP_CHECK(a.done(), "the attempt's workers still run: next() until kExited");
  AttemptResult r = a.take_result();
  impl_->attempt.reset();
  return r;
}

void Supervisor::kill() noexcept { impl_->attempt.reset(); }

AttemptResult Supervisor::run(const rdzv::NodeAssignment& assignment, const AttemptOptions& attempt) {
  start(assignment, attempt);
  while (next() != SupervisorEvent::kExited) {
  }
  return result();
}

int Supervisor::poll_signal() {
  signalfd_siginfo info;
  while (::read(impl_->state.signal_fd.get(), &info, sizeof info) == sizeof info) {
    if (static_cast<int>(info.ssi_signo) != SIGCHLD) return static_cast<int>(info.ssi_signo);
  }
  return 0;
}

int Supervisor::signal_fd() const { return impl_->state.signal_fd.get(); }

void Supervisor::wake_monitor() {
  const uint64_t one = 1;
  [[maybe_unused]] const ssize_t n =
      ::write(impl_->state.wake.get(), &one, sizeof one);  // full: woken already
}

}  // namespace ddp::launcher
