#pragma once
// The launcher's view of "every process of the job": all descendants of this process, found
// through /proc/<pid>/task/<tid>/children. Because the launcher is a child subreaper
// (PR_SET_CHILD_SUBREAPER), a grandchild whose parent died is re-parented to the launcher
// rather than to init, so it stays in this tree and can still be killed and reaped.
#include <sys/types.h>

#include <vector>

namespace ddp::launcher {

// Makes this process a child subreaper. Throws SystemError if the kernel refuses.
void become_subreaper();

// Every live descendant of `root` (children first, then theirs), read from /proc. A process
// that exits while the tree is walked is simply missing from the result.
std::vector<pid_t> descendants(pid_t root);

// True when every thread of `pid` has begun to exit (PF_EXITING in /proc/<pid>/task/*/stat):
// the process is dying or a zombie, and waitpid will have it soon. The kernel sets the flag
// before the process closes its files, so a process whose peers already saw its sockets close
// is exiting by this test even before it can be reaped. False for a pid not in /proc.
bool is_exiting(pid_t pid);

// SIGKILLs every descendant of this process until none is left, reaping the ones that are our
// own children. Returns how many processes were killed. Used at the end of every attempt so no
// process of the job (daemonized grandchildren included) outlives it. `reaped`, when given,
// receives the pids this call reaped (for clean-up of what they left, e.g. shm segments).
int kill_all_descendants(std::vector<pid_t>* reaped = nullptr);

}  // namespace ddp::launcher
