#include "launcher/process_tree.h"

#include <dirent.h>
#include <errno.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <fstream>
#include <sstream>
#include <string>

#include "common/error.h"

namespace ddp::launcher {
namespace {

std::vector<pid_t> children_of(pid_t pid) {
  std::vector<pid_t> out;
  std::string task_dir = "/proc/" + std::to_string(pid) + "/task";
  DIR* dir = ::opendir(task_dir.c_str());
  if (dir == nullptr) return out;  // exited meanwhile
  while (dirent* entry = ::readdir(dir)) {
    if (entry->d_name[0] < '0' || entry->d_name[0] > '9') continue;
    std::ifstream in(task_dir + "/" + entry->d_name + "/children");
    pid_t child;
    while (in >> child) out.push_back(child);
  }
  ::closedir(dir);
  return out;
}

// The `flags` field (the 9th) of a /proc/<pid>/stat line; the command name (2nd) may hold
// spaces and parentheses, so fields are counted from the last ')'.
bool stat_flags(const std::string& path, unsigned long* flags) {
  std::ifstream in(path);
  std::string line;
  if (!std::getline(in, line)) return false;
  const size_t close = line.rfind(')');
  if (close == std::string::npos) return false;
  std::istringstream fields(line.substr(close + 1));
  std::string skip;
  for (int field = 3; field < 9; ++field) fields >> skip;  // state .. tpgid
  return static_cast<bool>(fields >> *flags);
}

}  // namespace

void become_subreaper() {
  if (::prctl(PR_SET_CHILD_SUBREAPER, 1) != 0) DDP_THROW_ERRNO("prctl(PR_SET_CHILD_SUBREAPER)");
}

std::vector<pid_t> descendants(pid_t root) {
  std::vector<pid_t> out = children_of(root);
  for (size_t i = 0; i < out.size(); ++i) {
    for (pid_t grandchild : children_of(out[i])) out.push_back(grandchild);
  }
  return out;
}

bool is_exiting(pid_t pid) {
  constexpr unsigned long kPfExiting = 0x4;  // include/linux/sched.h
  const std::string task_dir = "/proc/" + std::to_string(pid) + "/task";
  DIR* dir = ::opendir(task_dir.c_str());
  if (dir == nullptr) return false;
  int threads = 0;
  bool all_exiting = true;
  while (dirent* entry = ::readdir(dir)) {
    if (entry->d_name[0] < '0' || entry->d_name[0] > '9') continue;
    unsigned long flags = 0;
    if (!stat_flags(task_dir + "/" + entry->d_name + "/stat", &flags)) continue;  // gone meanwhile
    ++threads;
    if ((flags & kPfExiting) == 0) all_exiting = false;
  }
  ::closedir(dir);
  return threads > 0 && all_exiting;
}

int kill_all_descendants(std::vector<pid_t>* reaped) {
  int killed = 0;
  // Each pass kills what it sees; orphans of killed processes re-parent to us and show up in
  // the next pass. Zombies (already dead, awaiting our reap) are listed too: kill is harmless.
  for (int pass = 0; pass < 100; ++pass) {
    std::vector<pid_t> pids = descendants(::getpid());
    if (pids.empty()) break;
    for (pid_t pid : pids) {
      if (::kill(pid, SIGKILL) == 0) ++killed;
    }
    // Reap our direct children, blocking: they were SIGKILLed, so this is short.
    for (pid_t pid : children_of(::getpid())) {
      pid_t got;
      while ((got = ::waitpid(pid, nullptr, 0)) < 0 && errno == EINTR) {
      }
      if (got == pid && reaped != nullptr) reaped->push_back(pid);
    }
  }
  return killed;
}

}  // namespace ddp::launcher
