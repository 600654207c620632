#pragma once
// Helpers for the launcher's black-box tests: a scratch directory, a "launcher" run in a
// forked child process (the Supervisor blocks signals and becomes a subreaper process-wide,
// which must not leak into doctest's own process), and small /proc queries.
#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iostream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <thread>

#include "launcher/process_tree.h"
#include "launcher/supervisor.h"

namespace ddp::launcher::test {

class TempDir {
 public:
  TempDir() {
    std::string pattern = (std::filesystem::temp_directory_path() / "ddp-launcher-test-XXXXXX").string();
    if (::mkdtemp(pattern.data()) == nullptr) throw std::runtime_error("mkdtemp");
    path_ = pattern;
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  const std::string& path() const { return path_; }
  std::string operator/(const std::string& name) const { return path_ + "/" + name; }

 private:
  std::string path_;
};

inline std::string read_file(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

inline bool exists(const std::string& path) { return std::filesystem::exists(path); }

// Waits (generously) for a condition the test cannot be notified of, such as a file a worker
// writes. Not a timing assertion: the deadline only turns a bug into a failure, not a hang.
inline bool eventually(const std::function<bool()>& cond,
                       std::chrono::seconds limit = std::chrono::seconds(60)) {
  auto deadline = std::chrono::steady_clock::now() + limit;
  while (std::chrono::steady_clock::now() < deadline) {
    if (cond()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  return cond();
}

inline bool process_gone(pid_t pid) { return ::kill(pid, 0) != 0 && errno == ESRCH; }

inline rdzv::NodeAssignment single_node(int nproc, const std::string& run_id = "test-run") {
  rdzv::NodeAssignment a;
  a.node_rank = 0;
  a.nnodes = 1;
  a.world_size = nproc;
  a.rank_offset = 0;
  a.local_world_size = nproc;
  a.nproc_by_node = {nproc};
  a.master_addr = "127.0.0.1";
  a.master_port = 29555;
  a.run_id = run_id;
  return a;
}

inline LaunchOptions sh_options(const std::string& script, int nproc = 1) {
  LaunchOptions o;
  o.command = {"/bin/sh", "-c", script};
  o.nproc_per_node = nproc;
  o.run_id = "test-run";
  o.shutdown_timeout = std::chrono::milliseconds(60'000);
  return o;
}

struct Outcome {
  int launcher_status = -1;  // waitpid status of the launcher child
  nlohmann::json result;     // AttemptResult as JSON, plus "descendants_left"
  std::string console;       // what the launcher wrote to stdout and stderr (if captured)
};

// Runs the Supervisor in a forked "launcher" process. `with_launcher` runs in the test
// process while the launcher child is alive (send it signals, wait for files); the launcher's
// stdout/stderr go to console_file when given.
inline Outcome run_launcher(const LaunchOptions& options, const rdzv::NodeAssignment& assignment,
                            const std::function<void(pid_t)>& with_launcher = {},
                            const std::string& console_file = "", int restart_count = 0,
                            std::function<bool()> external_stop = {}) {
  int fds[2];
  if (::pipe(fds) != 0) throw std::runtime_error("pipe");
  // Buffered output of the test runner must not be flushed a second time by the child.
  std::cout.flush();
  std::cerr.flush();
  std::fflush(nullptr);
  pid_t child = ::fork();
  if (child == 0) {
    ::close(fds[0]);
    int rc = 0;
    std::string text;
    try {
      if (!console_file.empty()) {
        int fd = ::open(console_file.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
        ::dup2(fd, 1);
        ::dup2(fd, 2);
        ::close(fd);
      }
      Supervisor supervisor(options);
      AttemptOptions attempt;
      attempt.restart_count = restart_count;
      if (external_stop) attempt.monitor_interval = options.monitor_interval;
      supervisor.start(assignment, attempt);
      while (supervisor.next() == SupervisorEvent::kTick) {
        if (external_stop && external_stop()) supervisor.stop();
      }
      AttemptResult r = supervisor.result();
      nlohmann::json j;
      j["success"] = r.success;
      j["interrupted_by"] = r.interrupted_by;
      j["stopped_externally"] = r.stopped_externally;
      j["exit_code"] = r.exit_code();
      j["failures"] = nlohmann::json::array();
      for (const auto& f : r.failures) {
        j["failures"].push_back({{"rank", f.rank},
                                 {"local_rank", f.local_rank},
                                 {"host", f.host},
                                 {"pid", f.pid},
                                 {"exit_code", f.exit_code},
                                 {"signal", f.signal},
                                 {"error_head", f.error_head},
                                 {"error_file", f.error_file},
                                 {"message", f.message},
                                 {"time", f.time}});
      }
      j["summary"] = r.success ? "" : format_failure_summary(r, options.command.front());
      j["descendants_left"] = descendants(::getpid()).size();
      text = j.dump();
    } catch (const std::exception& e) {
      text = nlohmann::json{{"exception", e.what()}}.dump();
      rc = 1;
    }
    size_t off = 0;
    while (off < text.size()) {
      ssize_t n = ::write(fds[1], text.data() + off, text.size() - off);
      if (n <= 0) break;
      off += static_cast<size_t>(n);
    }
    ::fflush(nullptr);
    ::_exit(rc);
  }
  ::close(fds[1]);
  if (with_launcher) with_launcher(child);
  std::string text;
  char buf[4096];
  ssize_t n;
  while ((n = ::read(fds[0], buf, sizeof buf)) > 0) text.append(buf, static_cast<size_t>(n));
  ::close(fds[0]);
  Outcome out;
  ::waitpid(child, &out.launcher_status, 0);
  out.result = text.empty() ? nlohmann::json::object() : nlohmann::json::parse(text);
  if (!console_file.empty()) out.console = read_file(console_file);
  return out;
}

}  // namespace ddp::launcher::test
