#include "bench/torch_store_peer.h"

#include <sys/wait.h>
#include <unistd.h>

#include <nlohmann/json.hpp>

#include "common/error.h"

namespace ddp::bench {
namespace {

// The same phases as store_bench.cc's run_phase, in Python, printing one JSON line per phase.
constexpr const char* kScript = R"PY(
import datetime, json, sys, threading, time
import torch.distributed as dist
clients, per, vsize, repeat = (int(a) for a in sys.argv[1:5])
timeout = datetime.timedelta(seconds=60)
server = dist.TCPStore("127.0.0.1", 0, is_master=True, wait_for_workers=False, timeout=timeout)
cs = [dist.TCPStore("127.0.0.1", server.port, is_master=False, timeout=timeout) for _ in range(clients)]
def key(r, c, i): return f"r{r}/c{c}/k{i}"
def value(k): return (k * (vsize // len(k) + 1))[:vsize].encode()
def pct(xs, p):
    pos = p / 100 * (len(xs) - 1); lo = int(pos); hi = min(lo + 1, len(xs) - 1)
    return xs[lo] + (xs[hi] - xs[lo]) * (pos - lo)
def phase(name, r, fn):
    lat = [[] for _ in range(clients)]; errs = []
    start = threading.Barrier(clients + 1)
    def run(c):
        start.wait(); pc = time.perf_counter; l = lat[c]
        for i in range(per):
            t0 = pc()
            try: fn(c, i)
            except Exception as e: errs.append(str(e)); return
            l.append(pc() - t0)
    ts = [threading.Thread(target=run, args=(c,)) for c in range(clients)]
    for t in ts: t.start()
    t0 = time.perf_counter(); start.wait()
    for t in ts: t.join()
    secs = time.perf_counter() - t0
    if errs: sys.exit("torch TCPStore: WRONG RESULT: " + errs[0])
    xs = sorted(x * 1e6 for l in lat for x in l)
    print(json.dumps({"op": name, "round": r, "ops_per_s": len(xs) / secs, "p50_us": pct(xs, 50), "p99_us": pct(xs, 99)}), flush=True)
def get(r, c, i):
    k = key(r, c, i); v = cs[c].get(k)
    if v != value(k): raise RuntimeError(f"get {k} returned {v[:24]!r}, expected {value(k)[:24]!r}")
for r in range(repeat):
    phase("set", r, lambda c, i: cs[c].set(key(r, c, i), value(key(r, c, i))))
    phase("get", r, lambda c, i: get(r, c, i))
    phase("add", r, lambda c, i: cs[c].add(f"counter/{r}", 1))
    total = server.add(f"counter/{r}", 0)
    if total != clients * per: sys.exit(f"torch TCPStore: WRONG RESULT: add total {total}, expected {clients * per}")
def nothing(c, i): pass
floors = []
for _ in range(5):
    pc = time.perf_counter; t = pc()
    for i in range(per * 10):
        t0 = pc(); nothing(0, i); pc() - t0
    floors.append((pc() - t) / (per * 10) * 1e6)
print(json.dumps({"floor_us": sorted(floors)[2]}), flush=True)
)PY";

// Runs argv, returns its stdout; throws when it cannot start or exits non-zero.
std::string capture(const std::vector<std::string>& argv) {
  std::vector<char*> cargv;
  cargv.reserve(argv.size() + 1);
  for (const auto& a : argv) cargv.push_back(const_cast<char*>(a.c_str()));
  cargv.push_back(nullptr);
  int fds[2];
  if (::pipe(fds) != 0) DDP_THROW_ERRNO("pipe");
  const pid_t pid = ::fork();
  if (pid < 0) DDP_THROW_ERRNO("fork");
  if (pid == 0) {
    ::dup2(fds[1], 1);
    ::close(fds[0]);
    ::close(fds[1]);
    ::execv(cargv[0], cargv.data());
    ::_exit(127);
  }
  ::close(fds[1]);
  std::string out;
  char buf[4096];
  for (;;) {
    const ssize_t n = ::read(fds[0], buf, sizeof(buf));
    if (n > 0) {
      out.append(buf, static_cast<size_t>(n));
      continue;
    }
    if (n == 0 || errno != EINTR) break;
  }
  ::close(fds[0]);
  int status = 0;
  ::waitpid(pid, &status, 0);
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    DDP_THROW(Error, argv[0], " (PyTorch's TCPStore, the peer) failed with status ", WEXITSTATUS(status),
              WEXITSTATUS(status) == 127 ? " (not installed?)" : " (see its message above)",
              "; --python names another, --no-peers measures ours alone");
  }
  return out;
}

}  // namespace

std::string value_of(const std::string& key, size_t size) {
  std::string v;
  while (v.size() < size) v += key;
  v.resize(size);
  return v;
}

TorchStoreRun run_torch_tcpstore(const TorchStoreOptions& o) {
  const std::string out =
      capture({o.python, "-c", kScript, std::to_string(o.clients), std::to_string(o.ops_per_client),
               std::to_string(o.value_size), std::to_string(o.repeat)});
  TorchStoreRun run;
  size_t start = 0;
  while (start < out.size()) {
    size_t end = out.find('\n', start);
    if (end == std::string::npos) end = out.size();
    const std::string line = out.substr(start, end - start);
    start = end + 1;
    if (line.empty() || line[0] != '{') continue;
    const auto j = nlohmann::json::parse(line);
    if (j.contains("floor_us")) {
      run.floor_us = j["floor_us"].get<double>();
      continue;
    }
    run.phases.push_back({j["op"].get<std::string>(), j["round"].get<int>(), j["ops_per_s"].get<double>(),
                          j["p50_us"].get<double>(), j["p99_us"].get<double>()});
  }
  if (run.phases.size() != 3 * static_cast<size_t>(o.repeat)) {
    DDP_THROW(Error, "PyTorch's TCPStore peer reported ", run.phases.size(), " phases, expected ",
              3 * o.repeat);
  }
  return run;
}

}  // namespace ddp::bench
