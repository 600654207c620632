#pragma once
// Starting one worker process: clone (vfork-like) + execve, with everything a supervised worker
// needs set up in the child between the two (own session and process group, PR_SET_PDEATHSIG,
// signal mask and dispositions restored, CPU affinity, preferred NUMA memory, stdout/stderr).
// Only async-signal-safe calls run in the child: safe from a multi-threaded launcher. Not
// Boost.Process (its own SIGCHLD handling collides with the supervisor's single reaper) nor
// posix_spawn (no PDEATHSIG, no affinity). Exec failures: the child reports errno through a
// CLOEXEC pipe, then _exit(127) when the program was not found, else 126 (shell convention); the
// pipe is read after reaping (read_exec_error), so N workers start without N round trips.
#include <sched.h>
#include <signal.h>
#include <sys/types.h>

#include <optional>
#include <string>
#include <vector>

#include "common/fd.h"

namespace ddp::launcher {

struct SpawnOptions {
  std::string path;               // executable to execve (see resolve_executable)
  std::vector<std::string> argv;  // argv[0] first
  std::vector<std::string> env;   // "KEY=VALUE"
  int stdout_fd = -1;             // -1: inherit the launcher's
  int stderr_fd = -1;
  std::optional<cpu_set_t> cpus;  // affinity for the child; nullopt: inherited
  int preferred_numa_node = -1;   // memory policy MPOL_PREFERRED on this node; -1: inherited
  sigset_t sigmask{};             // mask restored in the child before exec
};

struct Spawned {
  pid_t pid = -1;
  Fd exec_status;  // read end: errno of a failed exec, EOF after a successful one
};

// execvp's lookup, done in the parent (PATH search is not async-signal-safe): a name with a
// '/' is returned as is; otherwise the first executable match on PATH, or the name unchanged
// when none matches (execve then fails with ENOENT and the worker reports it).
std::string resolve_executable(const std::string& name);

// Clones and execs. Throws SystemError when the child or a pipe cannot be made; failures inside
// the child arrive as the child's exit status plus exec_status.
Spawned spawn_process(const SpawnOptions& options);

// Sends sig to the worker's process group (pgid == pid), or to the worker alone while its
// group does not exist yet (signalled between the clone and the child's setsid) or any more.
// The caller guarantees pid is its unreaped child or a group leader id it started.
void signal_worker(pid_t pid, int sig);

// After the child has exited: "exec PATH: strerror" when its exec failed, else nullopt.
std::optional<std::string> read_exec_error(int exec_status_fd, const std::string& path);

}  // namespace ddp::launcher
