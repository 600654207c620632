#include "launcher/spawn.h"

#include <errno.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <array>
#include <cstring>

#include "common/error.h"
#include "common/settings.h"

namespace ddp::launcher {
namespace {

// Everything the child touches, prepared before the clone: the child must not allocate.
constexpr int kMpolPreferred = 1;  // <numaif.h>'s MPOL_PREFERRED, without needing libnuma

struct ChildPlan {
  const char* path;
  std::vector<char*> argv;
  std::vector<char*> envp;
  int stdout_fd;
  int stderr_fd;
  const cpu_set_t* cpus;
  std::array<unsigned long, 16> numa_mask;  // preferred NUMA node (one bit), all zero: none
  const sigset_t* sigmask;
  pid_t parent;
  int status_fd;
};

[[noreturn]] void child_fail(int status_fd, int err) {
  // A short write to a fresh pipe is atomic; nothing useful can be done if it fails.
  ssize_t n = ::write(status_fd, &err, sizeof err);
  (void)n;
  _exit(err == ENOENT || err == ENOTDIR ? 127 : 126);
}

// Default dispositions: ignored signals would otherwise survive exec (nohup's SIGHUP, say).
// The raw system call, not sigaction(3): glibc refuses the two signals it reserves for itself
// (32 and 33), yet a parent that is not a glibc program (a CI runner, say) may have left them
// ignored, and the worker would inherit that. All fields but the handler are zero, so the
// layout of the kernel's struct is the same on every architecture.
void reset_signal_dispositions() {
  struct KernelSigaction {
    void (*handler)(int);
    unsigned long flags;
    void (*restorer)();
    unsigned long mask;
  } dfl{};
  dfl.handler = SIG_DFL;
  for (int sig = 1; sig < NSIG; ++sig) {
    if (sig != SIGKILL && sig != SIGSTOP) ::syscall(SYS_rt_sigaction, sig, &dfl, nullptr, sizeof dfl.mask);
  }
}

// Runs between clone and exec: async-signal-safe calls only.
[[noreturn]] void child_main(const ChildPlan& p) {
  // Own session, hence own process group (pgid == pid), so signals and the final kill reach
  // the worker and everything it started without touching the launcher. A session rather
  // than only setpgid, as torchrun (start_new_session=True): a background process group of
  // the launcher's session would be stopped by SIGTTIN/SIGTTOU when it reads the terminal.
  if (::setsid() < 0) child_fail(p.status_fd, errno);
  // The launcher dying (even by SIGKILL) takes the worker down; then close the race where the
  // launcher died before the prctl took effect.
  if (::prctl(PR_SET_PDEATHSIG, SIGKILL) != 0) child_fail(p.status_fd, errno);
  if (::getppid() != p.parent) _exit(128 + SIGKILL);
  if (p.cpus != nullptr && ::sched_setaffinity(0, sizeof(cpu_set_t), p.cpus) != 0) {
    child_fail(p.status_fd, errno);
  }
  // Memory preferred on the rank's NUMA node (a hint: the kernel falls back to other nodes, and
  // a kernel without NUMA refuses it harmlessly). Kept across exec.
  if (p.numa_mask != decltype(p.numa_mask){}) {
    ::syscall(SYS_set_mempolicy, kMpolPreferred, p.numa_mask.data(),
              p.numa_mask.size() * sizeof(unsigned long) * 8);
  }
  if (p.stdout_fd >= 0 && ::dup2(p.stdout_fd, STDOUT_FILENO) < 0) child_fail(p.status_fd, errno);
  if (p.stderr_fd >= 0 && ::dup2(p.stderr_fd, STDERR_FILENO) < 0) child_fail(p.status_fd, errno);
  reset_signal_dispositions();
  ::sigprocmask(SIG_SETMASK, p.sigmask, nullptr);
  ::execve(p.path, p.argv.data(), p.envp.data());
  child_fail(p.status_fd, errno);
}

// The child shares the launcher's memory and the launcher's thread waits until it has exec'd or
// exited (CLONE_VM | CLONE_VFORK, as posix_spawn): no page tables copied, no copy-on-write faults
// afterwards, the child runs at once. It runs on a stack of its own with every signal blocked, so
// no handler of the launcher's runs in it; it resets dispositions and sets its mask before exec.
pid_t start_child(const ChildPlan& plan) {
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
  // Under ASan and TSan, fork: their per-stack shadow state does not survive a child that runs
  // in the launcher's memory on a stack of its own (ASan reports stack-use-after-scope there).
  const pid_t pid = ::fork();
  if (pid == 0) child_main(plan);
  return pid;
#else
  constexpr size_t kStack = size_t{64} << 10;
  auto entry = [](void* p) -> int { child_main(*static_cast<const ChildPlan*>(p)); };
  void* stack =
      ::mmap(nullptr, kStack, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_STACK, -1, 0);
  if (stack == MAP_FAILED) return -1;
  sigset_t all, saved;
  ::sigfillset(&all);
  // The raw call: glibc's sigprocmask leaves its two internal signals unblocked.
  ::syscall(SYS_rt_sigprocmask, SIG_SETMASK, &all, &saved, _NSIG / 8);
  const pid_t pid = ::clone(entry, static_cast<char*>(stack) + kStack, CLONE_VM | CLONE_VFORK | SIGCHLD,
                            const_cast<ChildPlan*>(&plan));
  const int err = errno;
  ::syscall(SYS_rt_sigprocmask, SIG_SETMASK, &saved, nullptr, _NSIG / 8);
  ::munmap(stack, kStack);
  errno = err;
  return pid;
#endif
}

bool is_executable_file(const std::string& path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode) && ::access(path.c_str(), X_OK) == 0;
}

}  // namespace

std::string resolve_executable(const std::string& name) {
  if (name.empty() || name.find('/') != std::string::npos) return name;
  const std::string path = settings::get_or(settings::kPath, std::string(settings::kPath.fallback));
  size_t start = 0;
  while (start <= path.size()) {
    size_t end = path.find(':', start);
    if (end == std::string::npos) end = path.size();
    std::string dir = path.substr(start, end - start);
    std::string candidate = (dir.empty() ? std::string(".") : dir) + "/" + name;
    if (is_executable_file(candidate)) return candidate;
    start = end + 1;
  }
  return name;
}

Spawned spawn_process(const SpawnOptions& options) {
  DDP_CHECK(!options.argv.empty(), "spawn_process needs argv[0]");
  int status[2];
  if (::pipe2(status, O_CLOEXEC | O_NONBLOCK) != 0)
    DDP_THROW_ERRNO("pipe2 for the exec status of ", options.path);
  Fd status_read(status[0]);
  Fd status_write(status[1]);

  ChildPlan plan{};
  plan.path = options.path.c_str();
  for (const auto& a : options.argv) plan.argv.push_back(const_cast<char*>(a.c_str()));
  plan.argv.push_back(nullptr);
  for (const auto& e : options.env) plan.envp.push_back(const_cast<char*>(e.c_str()));
  plan.envp.push_back(nullptr);
  plan.stdout_fd = options.stdout_fd;
  plan.stderr_fd = options.stderr_fd;
  plan.cpus = options.cpus ? &*options.cpus : nullptr;
  plan.numa_mask = {};
  const int node = options.preferred_numa_node;
  if (node >= 0 && static_cast<size_t>(node) < plan.numa_mask.size() * sizeof(unsigned long) * 8) {
    plan.numa_mask[static_cast<size_t>(node) / (sizeof(unsigned long) * 8)] =
        1UL << (static_cast<size_t>(node) % (sizeof(unsigned long) * 8));
  }
  plan.sigmask = &options.sigmask;
  plan.parent = ::getpid();
  plan.status_fd = status_write.get();

  const pid_t pid = start_child(plan);
  if (pid < 0) DDP_THROW_ERRNO("clone for ", options.path);
  // No setpgid from the parent (it would make the child's setsid fail): until the child has
  // run setsid its group does not exist, so signal_worker() falls back to the pid.
  return Spawned{pid, std::move(status_read)};
}

void signal_worker(pid_t pid, int sig) {
  if (::kill(-pid, sig) != 0 && errno == ESRCH) ::kill(pid, sig);
}

std::optional<std::string> read_exec_error(int exec_status_fd, const std::string& path) {
  int err = 0;
  ssize_t n;
  do {
    n = ::read(exec_status_fd, &err, sizeof err);
  } while (n < 0 && errno == EINTR);
  if (n != static_cast<ssize_t>(sizeof err)) return std::nullopt;
  return "exec " + path + ": " + std::strerror(err);
}

}  // namespace ddp::launcher
