#include "bench/local_ranks.h"

#include <sched.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <csignal>
#include <cstdlib>

#include "common/error.h"
#include "common/machine.h"
#include "common/settings.h"
#include "rendezvous/tcp_store.h"

namespace ddp::bench {
namespace {

std::string self_exe() {
  char self[4096];
  const ssize_t len = ::readlink("/proc/self/exe", self, sizeof(self) - 1);
  if (len <= 0) DDP_THROW_ERRNO("readlink(/proc/self/exe)");
  return std::string(self, static_cast<size_t>(len));
}

bool is_var(const std::string& kv, const std::vector<std::string>& names) {
  const std::string key = kv.substr(0, kv.find('='));
  return std::find(names.begin(), names.end(), key) != names.end();
}

// This process's environment with `set` replacing (or adding) the variables it names.
std::vector<std::string> environment_with(const std::vector<std::string>& set) {
  std::vector<std::string> names;
  names.reserve(set.size() + 3);
  for (const auto& kv : set) names.push_back(kv.substr(0, kv.find('=')));
  names.insert(names.end(), {"RANK", "WORLD_SIZE", "LOCAL_RANK"});  // never inherited from a caller
  std::vector<std::string> env = set;
  for (char** e = environ; *e != nullptr; ++e) {
    if (!is_var(*e, names)) env.emplace_back(*e);
  }
  return env;
}

std::vector<char*> pointers(std::vector<std::string>& strings) {
  std::vector<char*> out;
  out.reserve(strings.size() + 1);
  for (auto& s : strings) out.push_back(s.data());
  out.push_back(nullptr);
  return out;
}

// Everything is built before fork: the child of a threaded process may not allocate. cpu >= 0:
// the child runs on that CPU only.
pid_t spawn(std::vector<std::string> argv, std::vector<std::string> env, const std::string& who,
            int cpu = -1) {
  std::vector<char*> cargv = pointers(argv), cenv = pointers(env);
  const std::string failed = who + ": cannot start " + argv.front() + "\n";
  cpu_set_t one;
  CPU_ZERO(&one);
  if (cpu >= 0) CPU_SET(cpu, &one);
  const pid_t pid = ::fork();
  if (pid < 0) DDP_THROW_ERRNO("fork");
  if (pid == 0) {
    if (cpu >= 0) (void)::sched_setaffinity(0, sizeof(one), &one);  // unbound if refused
    ::execvpe(cargv[0], cargv.data(), cenv.data());
    (void)!::write(2, failed.data(), failed.size());
    ::_exit(127);
  }
  return pid;
}

std::vector<std::string> mpirun_argv(const LocalRanksOptions& o) {
  std::vector<std::string> argv = {"mpirun",
                                   "-np",
                                   std::to_string(o.world),
                                   "--allow-run-as-root",
                                   "--oversubscribe",
                                   "--bind-to",
                                   o.bind && !rank_cpus(o.world).empty() ? "core" : "none",
                                   "-x",
                                   std::string(settings::kStore.name),
                                   "-x",
                                   std::string(settings::kRunId.name),
                                   self_exe()};
  for (size_t i = 0; i < o.args.size(); ++i) {
    const std::string& a = o.args[i];
    if (a == "--world-size" || a == "-n") {
      ++i;  // mpirun gives the size now
      continue;
    }
    if (a.rfind("--world-size=", 0) == 0) continue;
    argv.push_back(a);
  }
  return argv;
}

int wait_all(const std::vector<pid_t>& pids) {
  int worst = 0;
  for (size_t left = pids.size(); left > 0; --left) {
    int status = 0;
    const pid_t pid = ::waitpid(-1, &status, 0);
    if (pid < 0) break;
    const int code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    if (code != 0 && worst == 0) {
      for (pid_t other : pids) {
        if (other != pid) ::kill(other, SIGTERM);
      }
    }
    worst = std::max(worst, code);
  }
  return worst;
}

}  // namespace

std::vector<int> rank_cpus(int world) {
  std::vector<int> cpus = first_usable_cpus(world);
  if (static_cast<int>(cpus.size()) < world) return {};
  return cpus;
}

// Each rank re-executes this command line, as launchers start workers: the kernel places a
// process on the idlest CPU at exec, while forked children start stacked on their parent's
// (and stay there for the first milliseconds: a short run measured nothing but that).
int run_local_ranks(const LocalRanksOptions& o) {
  rdzv::TCPStoreOptions so;
  so.host = "127.0.0.1";
  so.is_server = true;
  rdzv::TCPStore store(so);  // serves from its own threads: the children only exec
  auto var = [](const settings::Setting& s, const std::string& value) {
    return std::string(s.name) + "=" + value;
  };
  std::vector<std::string> meet = {var(settings::kStore, "127.0.0.1:" + std::to_string(store.port())),
                                   var(settings::kRunId, "bench-" + std::to_string(::getpid()))};
  // As ddp-launch does: ranks bound to a CPU each still know how many CPUs they share.
  if (!settings::get(settings::kLocalCpus))
    meet.push_back(var(settings::kLocalCpus, std::to_string(affinity_cpus())));
  std::vector<pid_t> pids;
  if (o.mpirun) {
    pids.push_back(spawn(mpirun_argv(o), environment_with(meet), o.who));
    return wait_all(pids);
  }
  std::vector<std::string> argv = {self_exe()};
  argv.insert(argv.end(), o.args.begin(), o.args.end());
  const std::vector<int> cpus = o.bind ? rank_cpus(o.world) : std::vector<int>{};
  for (int r = 0; r < o.world; ++r) {
    std::vector<std::string> env = meet;
    env.insert(env.end(), {"RANK=" + std::to_string(r), "WORLD_SIZE=" + std::to_string(o.world),
                           "LOCAL_RANK=" + std::to_string(r)});
    pids.push_back(
        spawn(argv, environment_with(env), o.who, cpus.empty() ? -1 : cpus[static_cast<size_t>(r)]));
  }
  return wait_all(pids);
}

}  // namespace ddp::bench
