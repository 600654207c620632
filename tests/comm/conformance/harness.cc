#include "harness.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <thread>

#include "comm/init.h"
#include "common/error.h"
#include "common/fd.h"
#include "rendezvous/hash_store.h"
#include "rendezvous/tcp_store.h"
#include "test_env.h"

namespace ddp::comm::conformance {
namespace {

// The store every forked child reports to. Its server runs in a process of its own, forked once
// on first use, so that the test process has no server thread when it forks the ranks: a child
// forked while that thread held an allocator lock (serving the ranks forked before it) hung in
// its first malloc. Seen under ASan, whose allocator takes no locks around fork in this
// toolchain: ranks 2 and 3 of 4 never wrote their address, ranks 0 and 1 waited 120 s for it.
uint16_t store_port() {
  static const uint16_t port = [] {
    int fds[2];
    if (::pipe2(fds, O_CLOEXEC) != 0) DDP_THROW_ERRNO("pipe2");
    Fd read_end(fds[0]);
    Fd write_end(fds[1]);
    const pid_t parent = ::getpid();
    const pid_t pid = ::fork();
    if (pid < 0) DDP_THROW_ERRNO("fork");
    if (pid == 0) {
      ::prctl(PR_SET_PDEATHSIG, SIGKILL);  // lives exactly as long as the test process
      if (::getppid() != parent) ::_exit(0);
      try {
        rdzv::TCPStoreOptions o;
        o.host = "127.0.0.1";
        o.is_server = true;
        rdzv::TCPStore server(o);
        const uint16_t p = server.port();
        if (::write(write_end.get(), &p, sizeof p) != sizeof p) ::_exit(1);
        for (;;) ::pause();
      } catch (const std::exception& e) {
        std::fprintf(stderr, "conformance store server: %s\n", e.what());
        ::_exit(1);  // the parent reads no port and says so
      }
    }
    write_end = Fd();
    uint16_t p = 0;
    if (::read(read_end.get(), &p, sizeof p) != sizeof p) {
      DDP_THROW(Error, "the conformance store's server process did not start");
    }
    return p;
  }();
  return port;
}

rdzv::TCPStore& parent_store() {
  static rdzv::TCPStore store([] {
    rdzv::TCPStoreOptions o;
    o.port = store_port();
    return o;
  }());
  return store;
}

[[noreturn]] void child_main(int rank, const ProcessOptions& o, const std::string& run,
                             const ProcessFn& body) {
  // doctest's crash handlers belong to the parent: a child that crashes just dies of its signal.
  for (int sig : {SIGABRT, SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGTERM, SIGINT}) ::signal(sig, SIG_DFL);
  std::string result;
  try {
    ::setenv("DDP_STORE", ("127.0.0.1:" + std::to_string(store_port())).c_str(), 1);
    ::setenv("RANK", std::to_string(rank).c_str(), 1);
    ::setenv("WORLD_SIZE", std::to_string(o.world).c_str(), 1);
    ::setenv("DDP_RUN_ID", run.c_str(), 1);
    ::setenv("DDP_TIMEOUT_MS", std::to_string(o.timeout.count()).c_str(), 1);
    InitOptions init;
    init.backend = backend_under_test();
    auto world = init_process_group(init);
    result = body(*world);
  } catch (const std::exception& e) {
    result = std::string("rank ") + std::to_string(rank) + " threw: " + e.what();
  }
  try {
    // A fresh connection: the parent's client object is not ours to share after fork.
    rdzv::TCPStoreOptions o2;
    o2.port = store_port();
    rdzv::TCPStore reporter(o2);
    reporter.set(run + "/result/" + std::to_string(rank), "=" + result);
  } catch (...) {
    ::_exit(3);
  }
  destroy_process_group();
  ::_exit(0);
}

// Waits for the child until the deadline (pidfd: no polling); kills it after that. Returns
// "" for a normal exit, else how it ended.
std::string reap(pid_t pid, const Deadline& deadline) {
  Fd pidfd(static_cast<int>(::syscall(SYS_pidfd_open, pid, 0)));
  bool killed = false;
  if (pidfd.get() >= 0) {
    pollfd p{pidfd.get(), POLLIN, 0};
    if (::poll(&p, 1, deadline.poll_ms()) == 0) killed = ::kill(pid, SIGKILL) == 0;
  }
  int status = 0;
  ::waitpid(pid, &status, 0);
  if (killed) return "hung and was killed at the harness deadline";
  if (WIFSIGNALED(status)) return "died of signal " + std::to_string(WTERMSIG(status));
  if (WEXITSTATUS(status) != 0) return "exited with status " + std::to_string(WEXITSTATUS(status));
  return "";
}

}  // namespace

const std::string& backend_under_test() {
  static const std::string name = test_env::get_or("DDP_CONFORMANCE_BACKEND", "tcp");
  return name;
}

bool threads_as_ranks() { return backend_under_test() == "tcp" || backend_under_test() == "gloo"; }
bool under_mpirun() {
  return test_env::get("OMPI_COMM_WORLD_SIZE").has_value() ||
         (test_env::get("RANK") && test_env::get("WORLD_SIZE"));
}
bool gpu_visible() { return ::access("/dev/nvidia0", F_OK) == 0 || ::access("/dev/nvidiactl", F_OK) == 0; }

ProcessGroupPtr mpirun_world() {
  static ProcessGroupPtr world = [] {
    InitOptions init;
    init.backend = backend_under_test();
    return init_process_group(init);
  }();
  return world;
}

std::vector<std::string> run_threads(int world, const ThreadFn& fn, Millis timeout) {
  auto store = std::make_shared<rdzv::HashStore>();
  std::vector<std::vector<std::string>> per_rank(world);
  std::vector<std::thread> threads;
  for (int r = 0; r < world; ++r) {
    threads.emplace_back([&, r] {
      try {
        GroupFactoryOptions o;
        o.backend = backend_under_test();
        o.store = store;
        o.rank = r;
        o.world_size = world;
        o.timeout = timeout;
        GroupFactory f(o);
        per_rank[r] = fn(f);
      } catch (const std::exception& e) {
        per_rank[r].push_back("rank " + std::to_string(r) + "/" + std::to_string(world) +
                              " threw: " + e.what());
      }
    });
  }
  for (auto& t : threads) t.join();
  std::vector<std::string> out;
  for (auto& v : per_rank) out.insert(out.end(), v.begin(), v.end());
  return out;
}

std::vector<std::string> run_processes(const ProcessOptions& o, const ProcessFn& body) {
  if (under_mpirun()) {
    std::string failure = body(*mpirun_world());
    if (failure.empty()) return {};
    return {failure};
  }
  static int runs = 0;
  const std::string run = "conformance-" + std::to_string(::getpid()) + "-" + std::to_string(runs++);
  rdzv::Store& store = parent_store();
  std::vector<pid_t> pids;
  for (int r = 0; r < o.world; ++r) {
    const pid_t pid = ::fork();
    if (pid < 0) DDP_THROW_ERRNO("fork");
    if (pid == 0) child_main(r, o, run, body);
    pids.push_back(pid);
  }
  const Deadline deadline(o.deadline);
  std::vector<std::string> out;
  for (int r = 0; r < o.world; ++r) {
    const bool expected_dead =
        std::find(o.expect_killed.begin(), o.expect_killed.end(), r) != o.expect_killed.end();
    const std::string how = reap(pids[r], deadline);
    if (expected_dead) {
      // It must have died of SIGKILL before reporting: a rank that lived on proves nothing.
      if (how != "died of signal " + std::to_string(SIGKILL)) {
        out.push_back("rank " + std::to_string(r) + " was to die of SIGKILL but " +
                      (how.empty() ? "exited normally" : how));
      }
      if (store.check({run + "/result/" + std::to_string(r)})) {
        out.push_back("rank " + std::to_string(r) + " was to die of SIGKILL but reported a result");
      }
      continue;
    }
    if (o.tolerate_abort && how == "died of signal " + std::to_string(SIGABRT)) continue;
    if (!how.empty()) out.push_back("rank " + std::to_string(r) + " " + how);
    const std::string key = run + "/result/" + std::to_string(r);
    if (!store.check({key})) {
      if (how.empty()) out.push_back("rank " + std::to_string(r) + " exited without a report");
      continue;
    }
    std::string failure = store.get_string(key).substr(1);
    if (!failure.empty()) out.push_back(std::move(failure));
  }
  return out;
}

std::vector<std::string> run_worlds(const std::vector<int>& worlds, const WorldFn& fn) {
  std::vector<std::string> failures;
  auto add = [&](int n, std::vector<std::string> f) {
    for (auto& s : f) failures.push_back("world " + std::to_string(n) + ": " + s);
  };
  if (under_mpirun()) {
    ProcessGroupPtr world = mpirun_world();
    for (int n : worlds) {
      if (n > world->size()) continue;
      std::vector<int> members;
      for (int r = 0; r < n; ++r) members.push_back(r);
      ProcessGroupPtr g = new_group(members);  // every rank calls; non-members get nullptr
      if (g) add(n, fn(*g, n));
    }
    return failures;
  }
  for (int n : worlds) add(n, run_threads(n, [&](GroupFactory& gf) { return fn(*gf.world(), n); }));
  return failures;
}

}  // namespace ddp::comm::conformance
