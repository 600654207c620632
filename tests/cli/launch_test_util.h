#pragma once
// Helpers for black-box tests of build/bin/ddp-launch (DDP_BIN_DIR, set by ctest): run the
// binary as a child with extra environment, its stdout/stderr in files; find a job's processes
// by walking /proc for a marker in their environment; free ports; scratch directories.
#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "common/free_port.h"
#include "common/socket.h"

extern char** environ;

namespace ddp::test {

inline std::string bin_dir() {
  const char* d = std::getenv("DDP_BIN_DIR");
  return d ? d : "build/bin";
}
inline std::string launcher_path() { return bin_dir() + "/ddp-launch"; }

class ScratchDir {
 public:
  ScratchDir() {
    std::string pattern = (std::filesystem::temp_directory_path() / "ddp-launch-cli-XXXXXX").string();
    if (::mkdtemp(pattern.data()) == nullptr) throw std::runtime_error("mkdtemp");
    path_ = pattern;
  }
  ~ScratchDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  const std::string& path() const { return path_; }
  std::string operator/(const std::string& name) const { return path_ + "/" + name; }

 private:
  std::string path_;
};

inline std::string slurp(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

inline void write_file(const std::string& path, const std::string& text) { std::ofstream(path) << text; }

// Polls a condition the test cannot be notified of. The limit only turns a bug into a failure
// instead of a hang; it is not a timing assertion.
inline bool eventually(const std::function<bool()>& cond,
                       std::chrono::milliseconds limit = std::chrono::seconds(60)) {
  auto deadline = std::chrono::steady_clock::now() + limit;
  while (std::chrono::steady_clock::now() < deadline) {
    if (cond()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return cond();
}

// "KEY=VALUE" lines of an `env` dump -> map.
inline std::map<std::string, std::string> parse_env_dump(const std::string& text) {
  std::map<std::string, std::string> out;
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) {
    auto eq = line.find('=');
    if (eq != std::string::npos) out[line.substr(0, eq)] = line.substr(eq + 1);
  }
  return out;
}

// A running ddp-launch (or any program) with its output in files; killed if still running when
// destroyed, so a failing test never leaves one behind.
class Child {
 public:
  Child(const std::vector<std::string>& argv, const std::map<std::string, std::string>& env,
        const std::string& out_path, const std::string& err_path)
      : out_path_(out_path), err_path_(err_path) {
    std::map<std::string, std::string> merged;
    for (char** e = environ; *e != nullptr; ++e) {
      std::string kv = *e;
      auto eq = kv.find('=');
      merged[kv.substr(0, eq)] = eq == std::string::npos ? "" : kv.substr(eq + 1);
    }
    for (const auto& [k, v] : env) merged[k] = v;
    std::vector<std::string> envs;
    for (const auto& [k, v] : merged) envs.push_back(k + "=" + v);
    std::vector<char*> envp, args;
    for (auto& s : envs) envp.push_back(s.data());
    envp.push_back(nullptr);
    std::vector<std::string> argv_copy = argv;
    for (auto& s : argv_copy) args.push_back(s.data());
    args.push_back(nullptr);
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
    posix_spawn_file_actions_addopen(&fa, 1, out_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    posix_spawn_file_actions_addopen(&fa, 2, err_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    int rc = posix_spawnp(&pid_, args[0], &fa, nullptr, args.data(), envp.data());
    posix_spawn_file_actions_destroy(&fa);
    if (rc != 0) throw std::runtime_error("posix_spawnp " + argv[0] + " failed");
  }
  ~Child() {
    if (pid_ > 0 && !reaped_) {
      ::kill(pid_, SIGKILL);
      int st = 0;
      ::waitpid(pid_, &st, 0);
    }
  }
  Child(const Child&) = delete;
  Child& operator=(const Child&) = delete;

  pid_t pid() const { return pid_; }
  // Exit code, 128+N for death by signal N, or -1 if still running after `limit` (then killed).
  int wait(std::chrono::milliseconds limit = std::chrono::seconds(120)) {
    if (reaped_) return code_;
    int st = 0;
    bool done = eventually([&] { return ::waitpid(pid_, &st, WNOHANG) == pid_; }, limit);
    if (!done) {
      ::kill(pid_, SIGKILL);
      ::waitpid(pid_, &st, 0);
      reaped_ = true;
      return code_ = -1;
    }
    reaped_ = true;
    code_ = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
    return code_;
  }
  std::string out() const { return slurp(out_path_); }
  std::string err() const { return slurp(err_path_); }

 private:
  pid_t pid_ = -1;
  bool reaped_ = false;
  int code_ = -1;
  std::string out_path_, err_path_;
};

struct Result {
  int code = -1;
  std::string out, err;
};

// Runs ddp-launch with `args` to completion.
inline Result launch(const ScratchDir& dir, const std::vector<std::string>& args,
                     const std::map<std::string, std::string>& env = {},
                     std::chrono::milliseconds limit = std::chrono::seconds(120)) {
  static int n = 0;
  std::string tag = std::to_string(n++);
  std::vector<std::string> argv = {launcher_path()};
  argv.insert(argv.end(), args.begin(), args.end());
  Child c(argv, env, dir / ("launch" + tag + ".out"), dir / ("launch" + tag + ".err"));
  Result r;
  r.code = c.wait(limit);
  r.out = c.out();
  r.err = c.err();
  return r;
}

// Pids of every process whose environment contains `needle` (e.g. "DDP_RUN_ID=<unique id>").
inline std::vector<pid_t> processes_with_env(const std::string& needle) {
  std::vector<pid_t> out;
  DIR* d = ::opendir("/proc");
  if (d == nullptr) return out;
  while (dirent* e = ::readdir(d)) {
    char* end = nullptr;
    long pid = std::strtol(e->d_name, &end, 10);
    if (*end != '\0' || pid <= 0 || pid == ::getpid()) continue;
    std::ifstream in("/proc/" + std::string(e->d_name) + "/environ", std::ios::binary);
    std::string env((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    size_t pos = 0;
    while (pos < env.size()) {
      size_t z = env.find('\0', pos);
      if (z == std::string::npos) z = env.size();
      if (env.compare(pos, z - pos, needle) == 0) {
        // a zombie has an empty environ and cannot match; this one is alive
        out.push_back(static_cast<pid_t>(pid));
        break;
      }
      pos = z + 1;
    }
  }
  ::closedir(d);
  return out;
}

// A port p such that p and p+1 are free now (the static store uses p+1), outside the kernel's
// ephemeral range, so no outgoing connection of a test running beside this one takes it before
// the launcher binds it (net::pick_free_port).
inline int free_port_pair() { return net::pick_free_port(2); }

inline std::string unique_id(const std::string& what) {
  static int n = 0;
  return what + "-" + std::to_string(::getpid()) + "-" + std::to_string(n++);
}

}  // namespace ddp::test
