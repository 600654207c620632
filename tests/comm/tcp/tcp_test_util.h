#pragma once
// Helpers for the tcp backend's tests: threads-as-ranks over one HashStore, processes over a
// FileStore, and a scoped environment.
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "comm/backend.h"
#include "comm/tcp/tcp_process_group.h"
#include "common/error.h"
#include "rendezvous/hash_store.h"
#include "rendezvous/prefix_store.h"

namespace ddp::comm::tcp::testing {

class ScopedEnv {
 public:
  explicit ScopedEnv(std::map<std::string, std::optional<std::string>> vars) {
    for (auto& [k, v] : vars) {
      const char* old = std::getenv(k.c_str());
      saved_[k] = old ? std::optional<std::string>(old) : std::nullopt;
      if (v)
        ::setenv(k.c_str(), v->c_str(), 1);
      else
        ::unsetenv(k.c_str());
    }
  }
  ~ScopedEnv() {
    for (auto& [k, v] : saved_) {
      if (v)
        ::setenv(k.c_str(), v->c_str(), 1);
      else
        ::unsetenv(k.c_str());
    }
  }
  ScopedEnv(const ScopedEnv&) = delete;
  ScopedEnv& operator=(const ScopedEnv&) = delete;

 private:
  std::map<std::string, std::optional<std::string>> saved_;
};

inline GroupSetup setup_for(std::shared_ptr<rdzv::Store> store, int rank, int size,
                            Millis timeout = Millis(60'000), std::string token = "secret") {
  GroupSetup s;
  s.store = std::move(store);
  s.rank = rank;
  s.size = size;
  s.options.timeout = timeout;
  s.job_token = std::move(token);
  for (int r = 0; r < size; ++r) s.global_ranks.push_back(r);
  return s;
}

// Runs body(group, rank) on `size` threads, each with its own group over one HashStore.
// Exceptions from bodies are rethrown (the first one) after every thread joined.
inline void run_ranks(int size, const std::function<void(TcpProcessGroup&, int)>& body,
                      Millis timeout = Millis(60'000)) {
  auto store = std::make_shared<rdzv::HashStore>();
  static std::atomic<int> round{0};
  std::string prefix = "g";
  prefix += std::to_string(round++);  // (not "g" + ...: GCC 12 -Wrestrict false positive)
  auto prefixed = std::make_shared<rdzv::PrefixStore>(prefix, store);
  std::vector<std::thread> threads;
  std::vector<std::exception_ptr> errors(static_cast<size_t>(size));
  for (int r = 0; r < size; ++r) {
    threads.emplace_back([&, r] {
      try {
        auto pg = TcpProcessGroup::create(setup_for(prefixed, r, size, timeout));
        body(*pg, r);
      } catch (...) {
        errors[static_cast<size_t>(r)] = std::current_exception();
      }
    });
  }
  for (auto& t : threads) t.join();
  for (auto& e : errors) {
    if (e) std::rethrow_exception(e);
  }
}

// Forks `size` processes running body(rank) -> exit code; returns the exit codes (or 128+signal).
// The children are killed if they are not done within `limit`.
inline std::vector<int> run_processes(int size, const std::function<int(int)>& body,
                                      const std::function<void(const std::vector<pid_t>&)>& parent = {},
                                      std::chrono::seconds limit = std::chrono::seconds(60)) {
  std::vector<pid_t> pids;
  for (int r = 0; r < size; ++r) {
    pid_t pid = ::fork();
    if (pid == 0) {
      int code = 99;
      try {
        code = body(r);
      } catch (const std::exception& e) {
        std::fprintf(stderr, "rank %d: %s\n", r, e.what());
        code = 98;
      }
      std::fflush(stderr);
      ::_exit(code);
    }
    pids.push_back(pid);
  }
  if (parent) parent(pids);
  std::vector<int> codes(static_cast<size_t>(size), -1);
  const auto end = std::chrono::steady_clock::now() + limit;
  int left = size;
  while (left > 0) {
    for (int r = 0; r < size; ++r) {
      if (codes[static_cast<size_t>(r)] != -1) continue;
      int status = 0;
      if (::waitpid(pids[static_cast<size_t>(r)], &status, WNOHANG) == pids[static_cast<size_t>(r)]) {
        codes[static_cast<size_t>(r)] = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
        --left;
      }
    }
    if (left > 0 && std::chrono::steady_clock::now() > end) {
      for (int r = 0; r < size; ++r) {
        if (codes[static_cast<size_t>(r)] == -1) ::kill(pids[static_cast<size_t>(r)], SIGKILL);
      }
    }
    if (left > 0) std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  return codes;
}

inline std::string temp_path(const std::string& stem) {
  static std::atomic<int> n{0};
  return "/tmp/ddp-tcp-test-" + std::to_string(::getpid()) + "-" + stem + "-" + std::to_string(n++);
}

// Shared memory with small slots and one-shot limit: ops of a few thousand elements run past
// the one-shot size, in many chunks (the suites of the ops in group memory).
inline std::map<std::string, std::optional<std::string>> small_shm_geometry() {
  return {{"DDP_TCP_TRANSPORT", std::string("shm")},
          {"DDP_TCP_SHM_SLOT_BYTES", std::string("4096")},
          {"DDP_TCP_SHM_ONESHOT_BYTES", std::string("1024")}};
}

// Two ranks with group memory of 64 KiB each: rank 1 allocates, then never calls an op (nor
// leaves the group) while rank 0 runs `op` on the memory (its timeout short). True when rank 0
// got a TimeoutError naming rank 1.
inline bool absent_peer_named(const std::function<void(ProcessGroup&, GroupMemory&)>& op) {
  std::atomic<bool> named{false}, done{false};
  run_ranks(2, [&](TcpProcessGroup& pg, int r) {
    auto mem = pg.allocate(1 << 16);
    if (r == 1) {
      while (!done) std::this_thread::sleep_for(std::chrono::milliseconds(5));
      return;
    }
    try {
      op(pg, *mem);
    } catch (const TimeoutError& e) {
      named = std::string(e.what()).find("ranks [1]") != std::string::npos;
    }
    done = true;
  });
  return named;
}

}  // namespace ddp::comm::tcp::testing
