// store-demo: a real multi-process rendezvous through a TCPStore (the interim `make demo`).
// The parent hosts the store on an ephemeral loopback port with a fresh job token and forks
// N worker processes. Each worker connects, draws its rank from an atomic counter, publishes
// its pid under its rank, waits for every peer, reads them all back and checks in; the parent
// waits for all of them and reports. Exit code 0 only when every worker saw every peer.
#include <sys/wait.h>
#include <unistd.h>
#include <CLI/CLI.hpp>

#include <cstdio>
#include <random>
#include <string>
#include <vector>

#include "common/settings.h"
#include "rendezvous/tcp_store.h"

namespace {

using ddp::Millis;
using ddp::rdzv::TCPStore;
using ddp::rdzv::TCPStoreOptions;

constexpr Millis kTimeout{30'000};

int worker(uint16_t port, int world) {
  TCPStoreOptions o;
  o.port = port;
  o.timeout = kTimeout;
  o.connect_timeout = kTimeout;  // the token comes from DDP_JOB_TOKEN, as under the launcher
  TCPStore store(o);
  int rank = static_cast<int>(store.add("rank_counter", 1)) - 1;
  store.set("pid/" + std::to_string(rank), std::to_string(::getpid()));
  std::vector<std::string> keys;
  for (int r = 0; r < world; ++r) keys.push_back("pid/" + std::to_string(r));
  store.wait(keys);
  std::string peers;
  for (int r = 0; r < world; ++r)
    peers += (r ? " " : "") + std::to_string(r) + "=pid" + store.get_string(keys[r]);
  store.add("rank_sum", rank);
  std::printf("  worker pid %d: rank %d of %d, sees %s\n", ::getpid(), rank, world, peers.c_str());
  std::fflush(stdout);
  store.add("checked_in", 1);
  return 0;
}

std::string fresh_token() {
  std::random_device rd;
  char buf[33];
  std::snprintf(buf, sizeof(buf), "%08x%08x%08x%08x", rd(), rd(), rd(), rd());
  return buf;
}

}  // namespace

int main(int argc, char** argv) {
  int world = 4;
  CLI::App app{"A multi-process rendezvous through a TCPStore", "store-demo"};
  app.add_option("-n,--workers", world, "worker processes")->check(CLI::Range(1, 256));
  CLI11_PARSE(app, argc, argv);
  try {
    ::setenv(std::string(ddp::settings::kJobToken.name).c_str(), fresh_token().c_str(), 1);
    TCPStoreOptions o;
    o.is_server = true;
    o.timeout = kTimeout;
    TCPStore store(o);
    std::printf("store-demo: TCPStore serving on %s (job token required), forking %d workers\n",
                store.endpoint().str().c_str(), world);
    std::fflush(stdout);
    std::vector<pid_t> pids;
    for (int w = 0; w < world; ++w) {
      pid_t pid = ::fork();
      if (pid == 0) {
        int rc = 1;
        try {
          rc = worker(store.port(), world);
        } catch (const std::exception& e) {
          std::fprintf(stderr, "  worker pid %d: %s\n", ::getpid(), e.what());
        }
        std::fflush(stdout);
        ::_exit(rc);
      }
      if (pid < 0) throw std::runtime_error("fork failed");
      pids.push_back(pid);
    }
    int failed = 0;
    for (pid_t pid : pids) {
      int status = 0;
      ::waitpid(pid, &status, 0);
      if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) ++failed;
    }
    int64_t checked = store.add("checked_in", 0);
    int64_t sum = store.add("rank_sum", 0);
    int64_t expected = static_cast<int64_t>(world) * (world - 1) / 2;
    std::printf(
        "store-demo: %lld of %d workers met every peer; ranks sum to %lld (expected %lld); %d failed\n",
        static_cast<long long>(checked), world, static_cast<long long>(sum), static_cast<long long>(expected),
        failed);
    return failed == 0 && checked == world && sum == expected ? 0 : 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "store-demo: %s\n", e.what());
    return 1;
  }
}
