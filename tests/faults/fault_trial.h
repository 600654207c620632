#pragma once
// The fault matrix's harness: a Trial is one job of real processes (ranks started directly, or
// a launcher) that every process carries a marker for (DDP_FAULT_TRIAL=<id> in its environment),
// a fault injected once every rank is inside its collective loop, and the checks every trial
// ends with: it ended within its bound (configured timeouts are seconds; the bound only turns a
// hang into a failure, it is not a speed assertion), no process of the job is left, and no
// /dev/shm segment of any of its processes is left.
#include <signal.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "cli/launch_test_util.h"
#include "common/shm_names.h"

namespace ddp::test::faults {

inline std::string worker_path() { return bin_dir() + "/../tests/ddp_fault_worker"; }

// Bound on how long a faulted job may take to end: far above the timeouts the trials configure
// (a few seconds), far below a hang.
inline constexpr std::chrono::seconds kEndBound{45};

inline std::string run_id(const std::string& what) { return unique_id("fault-" + what); }

// Sorted /dev/shm/ddp-tcp-* entries created by one of `pids`.
inline std::vector<std::string> shm_left_by(const std::set<pid_t>& pids) {
  std::vector<std::string> out;
  std::error_code ec;
  for (const auto& e : std::filesystem::directory_iterator("/dev/shm", ec)) {
    const std::string name = e.path().filename().string();
    if (pids.count(shm_names::tcp_segment_creator(name)) != 0) out.push_back(name);
  }
  return out;
}

class Trial {
 public:
  explicit Trial(const std::string& what) : id_(run_id(what)) {}
  const std::string& id() const { return id_; }
  const ScratchDir& dir() const { return dir_; }

  // Starts one process of the job (a rank, a launcher, a store host); `env` gets the marker.
  Child& start(const std::vector<std::string>& argv, std::map<std::string, std::string> env = {}) {
    env["DDP_FAULT_TRIAL"] = id_;
    const std::string tag = std::to_string(children_.size());
    children_.push_back(
        std::make_unique<Child>(argv, env, dir_ / ("p" + tag + ".out"), dir_ / ("p" + tag + ".err")));
    pids_.insert(children_.back()->pid());
    return *children_.back();
  }
  // Rank r of a world started directly (no launcher): env:// with rank 0 hosting the store.
  Child& start_rank(int r, int world, int port, const std::vector<std::string>& args,
                    std::map<std::string, std::string> env = {}) {
    env.insert({{"RANK", std::to_string(r)},
                {"WORLD_SIZE", std::to_string(world)},
                {"LOCAL_RANK", std::to_string(r)},
                {"MASTER_ADDR", "127.0.0.1"},
                {"MASTER_PORT", std::to_string(port)},
                {"DDP_RUN_ID", id_},
                {"DDP_JOB_TOKEN", "fault-token"}});
    std::vector<std::string> argv = {worker_path(), "--dir", dir_.path()};
    argv.insert(argv.end(), args.begin(), args.end());
    return start(argv, env);
  }

  // Waits until `n` ranks wrote their ready file (every rank inside its loop); records their
  // pids (workers a launcher started included). False when they never did.
  bool wait_ready(int n) {
    bool ok = eventually(
        [&] {
          for (int r = 0; r < n; ++r) {
            if (!std::filesystem::exists(dir_ / ("ready." + std::to_string(r)))) return false;
          }
          return true;
        },
        std::chrono::seconds(60));
    for (int r = 0; ok && r < n; ++r) pids_.insert(rank_pid(r));
    for (pid_t p : processes_with_env("DDP_FAULT_TRIAL=" + id_)) pids_.insert(p);
    return ok;
  }
  pid_t rank_pid(int r) const {
    return static_cast<pid_t>(std::stol(slurp(dir_ / ("ready." + std::to_string(r)))));
  }

  // The fault happens now: the clock for time-to-error starts.
  void fault() { fault_at_ = std::chrono::steady_clock::now(); }
  double seconds_since_fault() const {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - fault_at_).count();
  }

  // Waits (bounded) for child i; its exit code, or -1 when it did not end within the bound.
  int wait(size_t i, std::chrono::seconds bound = kEndBound) { return children_.at(i)->wait(bound); }
  Child& child(size_t i) { return *children_.at(i); }

  // Every process of the job gone, and no segment of theirs left in /dev/shm.
  std::vector<pid_t> stray() const { return processes_with_env("DDP_FAULT_TRIAL=" + id_); }
  std::vector<std::string> shm_left() const { return shm_left_by(pids_); }

  // One line for the matrix's record (ctest -V shows it).
  void report(const std::string& outcome) const {
    std::fprintf(stderr, "fault-matrix: %s: %s, %.1f s after the fault\n", id_.c_str(), outcome.c_str(),
                 seconds_since_fault());
  }

 private:
  std::string id_;
  ScratchDir dir_;
  std::vector<std::unique_ptr<Child>> children_;
  std::set<pid_t> pids_;
  std::chrono::steady_clock::time_point fault_at_ = std::chrono::steady_clock::now();
};

// Kills (SIGKILL) what of the job is left after a failed check, so it leaves nothing running
// (the Trial's children are reaped by their Child).
inline void kill_all(const std::vector<pid_t>& pids) {
  for (pid_t p : pids) ::kill(p, SIGKILL);
}

inline bool contains(const std::string& hay, const std::string& needle) {
  return hay.find(needle) != std::string::npos;
}

// The line where worker rank r said why it failed ("fault_worker rank r: <kind>: ..."), or "".
inline std::string error_line(const std::string& text, int r) {
  const std::string head = "fault_worker rank " + std::to_string(r) + ": ";
  const size_t at = text.find(head);
  return at == std::string::npos ? "" : text.substr(at, text.find('\n', at) - at);
}

// Whether an error message names rank r: "rank r (pid ...)" or "ranks [..., r, ...]".
inline bool names_rank(const std::string& text, int r) {
  const std::string n = std::to_string(r);
  if (contains(text, "rank " + n)) return true;
  for (size_t at = text.find("ranks ["); at != std::string::npos; at = text.find("ranks [", at + 1)) {
    const std::string list = text.substr(at + 6, text.find(']', at) - at - 5);  // "[a, b]"
    for (const std::string sep : {"[", " "}) {
      for (const std::string end : {"]", ","}) {
        if (contains(list, sep + n + end)) return true;
      }
    }
  }
  return false;
}

}  // namespace ddp::test::faults
