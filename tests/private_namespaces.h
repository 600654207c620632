#pragma once
// Whether this process may enter private namespaces (root with CAP_SYS_ADMIN, no seccomp
// profile refusing unshare), probed in a child so that the caller's namespaces are untouched:
// for doctest::skip(!...) decorators, so that the cases needing them report Skipped elsewhere
// (docs/design.md, Testing) and fail, rather than skip, where they can run.
#include <sched.h>
#include <sys/mount.h>
#include <sys/wait.h>
#include <unistd.h>

namespace ddp::test {

namespace namespaces_detail {

// Runs `body` in a child; true when it returned true there.
template <typename Body>
bool in_child(Body&& body) {
  const pid_t child = ::fork();
  if (child < 0) return false;
  if (child == 0) ::_exit(body() ? 0 : 1);
  int status = 0;
  if (::waitpid(child, &status, 0) != child) return false;
  return WIFEXITED(status) && WEXITSTATUS(status) == 0;
}

}  // namespace namespaces_detail

// A private mount namespace with a small tmpfs mounted on /dev/shm.
inline bool can_mount_private_shm() {
  static const bool ok = namespaces_detail::in_child([] {
    return ::unshare(CLONE_NEWNS) == 0 && ::mount(nullptr, "/", nullptr, MS_REC | MS_PRIVATE, nullptr) == 0 &&
           ::mount("tmpfs", "/dev/shm", "tmpfs", 0, "size=1m") == 0;
  });
  return ok;
}

// A private IPC namespace.
inline bool can_unshare_ipc() {
  static const bool ok = namespaces_detail::in_child([] { return ::unshare(CLONE_NEWIPC) == 0; });
  return ok;
}

}  // namespace ddp::test
