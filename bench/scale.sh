#!/usr/bin/env bash
# How ddp-launch scales with the node count: N launchers on this machine, one trivial worker each
# (a shell that notes its start, then sleeps), a static job (--nnodes N --nproc-per-node 1), for
# each N of NS. Per N, TRIALS trials, medians of:
#   formed     seconds from the first launcher's start (it hosts the c10d store) to the last
#              worker's start (Python starting N launchers one after the other is part of it)
#   formation  the CPU seconds every launcher spent from its start until the job formed, and the
#              store host's launcher (or etcd) alone: what forming costs, whatever the wall time
#   steady     the CPU of every launcher together (utime + stime from /proc/<pid>/stat, all their
#              threads; workers excluded), in cores, over WINDOW seconds that begin SETTLE
#              seconds after the job formed; and of the store host's launcher alone, or of
#              etcd (ETCD_PID) when the job's store is etcd
#   requests   requests per second at the store over the window: counted by our store server
#              (the store host runs with DDP_LOG_LEVEL=debug and logs its count every 5 s), or
#              etcd's gRPC messages received (ETCD_METRICS, its /metrics URL); and bytes per
#              second, in and out together: our server's socket payload, or etcd's client gRPC
#              bytes (its JSON gateway's, which our client talks to, are not counted by etcd)
#   noticed    seconds from one launcher's SIGKILL (with its worker; the last started, so not the
#              store host) to the first survivor's exit, and to the last's (a static job that lost
#              a node ends: every survivor exits 122 naming it)
# A launcher that exits during the window is a node lost with nothing killed: counted in the row.
#
# Usage: bench/scale.sh [path/to/ddp-launch]   (default: $DDP_BIN_DIR or build/bin)
# Env: NS ("8 32 128 256 512"), TRIALS (3), WINDOW (30), SETTLE (5), TIMEOUT (s to form, 180),
#      BACKEND (--rdzv-backend, c10d), ENDPOINT (--rdzv-endpoint; default 127.0.0.1:<a free
#      port>, hosted by the first launcher; a backend served elsewhere, such as etcd, names its
#      own and has no store host among the launchers), CONF (--rdzv-conf, default none),
#      LABEL (names this launcher in the rows, e.g. "ddp-launch at 08480b7"; default ddp-launch),
#      ARGS (more ddp-launch options, e.g. "--monitor-interval 1"; default none),
#      OUT (a file for the rows, one JSON object per line, as bench/report.py reads scale.jsonl),
#      ETCD_PID and ETCD_METRICS (a local etcd's pid and http://host:port/metrics, optional),
#      KILL (0: no SIGKILLed launcher, for a launcher whose static job waits for the lost node to
#      come back instead of ending, as torchrun's; default 1), QUIET (a load average: each trial
#      starts once the 1-minute load is at most this, the last trial's teardown included, waiting
#      up to 10 minutes; default: no wait).
# Needs about 2N file descriptors at the store host: raises its soft limit to the hard one.
set -euo pipefail

here=$(cd "$(dirname "$0")/.." && pwd)
launcher=${1:-${DDP_BIN_DIR:-$here/build/bin}/ddp-launch}
[ -x "$launcher" ] || { echo "scale.sh: no ddp-launch at $launcher (build it first)" >&2; exit 2; }
ulimit -n "$(ulimit -Hn)"

exec /usr/bin/python3 - "$launcher" <<'PY'
import json, os, re, resource, signal, socket, statistics, subprocess, sys, tempfile, time

ddp_launch = sys.argv[1]
ns = [int(n) for n in os.environ.get("NS", "8 32 128 256 512").split()]
trials = int(os.environ.get("TRIALS", "3"))
window = float(os.environ.get("WINDOW", "30"))
settle = float(os.environ.get("SETTLE", "5"))
timeout = float(os.environ.get("TIMEOUT", "180"))
backend = os.environ.get("BACKEND", "c10d")
endpoint_env = os.environ.get("ENDPOINT", "")
conf = os.environ.get("CONF", "")
extra = os.environ.get("ARGS", "").split()
label = os.environ.get("LABEL", "ddp-launch")
etcd_pid = int(os.environ["ETCD_PID"]) if os.environ.get("ETCD_PID") else None
etcd_metrics = os.environ.get("ETCD_METRICS", "")
kill = os.environ.get("KILL", "1") != "0"
quiet = float(os.environ["QUIET"]) if os.environ.get("QUIET") else None
tick = os.sysconf("SC_CLK_TCK")
soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
if max(ns) * 2 + 64 > hard:
    sys.exit(f"scale.sh: N = {max(ns)} needs about {max(ns) * 2 + 64} file descriptors; the limit is {hard}")


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def listening(port):
    with socket.socket() as s:
        return s.connect_ex(("127.0.0.1", port)) == 0


def cpu_ticks(pid):
    """utime + stime of every thread of pid, or None once it is gone."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        return int(fields[11]) + int(fields[12])
    except (OSError, IndexError, ValueError):
        return None


def etcd_traffic():
    """(gRPC messages received, client gRPC bytes in and out) at etcd so far (every request through
    its JSON gateway is one message), or None."""
    if not etcd_metrics:
        return None
    import urllib.request
    try:
        text = urllib.request.urlopen(etcd_metrics, timeout=5).read().decode()
    except OSError:
        return None

    def total(*prefixes):
        return sum(float(line.rsplit(" ", 1)[1]) for line in text.splitlines() if line.startswith(prefixes))

    return (total("grpc_server_msg_received_total{"),
            total("etcd_network_client_grpc_received_bytes_total", "etcd_network_client_grpc_sent_bytes_total"))


STATS = re.compile(r"stats: uptime_s=([0-9.]+) requests=(\d+)(?: bytes_in=(\d+) bytes_out=(\d+))?")


def store_rate(log, since, until):
    """(requests, bytes in and out) per second at our store server between two of its uptimes, from
    its stats lines; None where it logged too few (or, for bytes, an older server: none)."""
    points = [(float(m[1]), int(m[2]), None if m[3] is None else int(m[3]) + int(m[4])) for m in STATS.finditer(log)]
    inside = [p for p in points if since <= p[0] <= until]
    if len(inside) < 2 or inside[-1][0] <= inside[0][0]:
        return None, None
    span = inside[-1][0] - inside[0][0]
    nbytes = None if inside[0][2] is None else (inside[-1][2] - inside[0][2]) / span
    return (inside[-1][1] - inside[0][1]) / span, nbytes


def cpu_model():
    with open("/proc/cpuinfo") as f:
        m = re.search(r"model name\s*:\s*(.*)", f.read())
    return m[1].strip() if m else "unknown"


def version():
    p = subprocess.run([ddp_launch, "--version"], capture_output=True, text=True)
    return (p.stdout.strip() or "ddp-launch").splitlines()[0]


class Job:
    """N launchers, each in its own session (so a SIGKILL can take its worker too)."""

    def __init__(self, n, tmp, k):
        self.n, self.dir = n, os.path.join(tmp, f"n{n}-t{k}")
        os.makedirs(self.dir)
        self.started = os.path.join(self.dir, "started")
        open(self.started, "w").close()
        port = None if endpoint_env else free_port()
        self.endpoint = endpoint_env or f"127.0.0.1:{port}"
        worker = ["/bin/sh", "-c", f"echo x >> {self.started}; exec sleep 100000"]
        cmd = [ddp_launch, "--nnodes", str(n), "--nproc-per-node", "1", "--rdzv-backend", backend,
               "--rdzv-endpoint", self.endpoint, "--rdzv-id", f"scale-{n}-{k}-{os.getpid()}"]
        cmd += (["--rdzv-conf", conf] if conf else []) + extra
        self.procs = []
        self.etcd_at_start = cpu_ticks(etcd_pid) if etcd_pid else None
        self.t0 = time.monotonic()
        self.listening = None  # when the store host's server began (its stats time from then)
        for i in range(n):
            env = dict(os.environ, DDP_LOG_LEVEL="debug") if i == 0 and port is not None else None
            with open(os.path.join(self.dir, f"{i}.log"), "wb") as log:
                # A process group each (killpg), but this session: with the kernel's autogroup
                # scheduling a session is a scheduling unit, and N sessions of launchers would get N
                # shares of the CPU to etcd's one (on a cluster each launcher has a host of its own).
                self.procs.append(subprocess.Popen(cmd + worker, stdout=log, stderr=subprocess.STDOUT,
                                                   stdin=subprocess.DEVNULL, process_group=0, env=env))
            if i == 0 and port is not None:  # the first one hosts the store: the others connect to it
                deadline = time.monotonic() + timeout
                while not listening(port):
                    if self.procs[0].poll() is not None or time.monotonic() > deadline:
                        raise RuntimeError("the first launcher did not serve the store:\n" + self.log(0)[-2000:])
                    time.sleep(0.01)
                self.listening = time.monotonic()
        self.host = self.procs[0] if port is not None else None

    def log(self, i):
        with open(os.path.join(self.dir, f"{i}.log"), errors="replace") as f:
            return f.read()

    def workers_started(self):
        return os.path.getsize(self.started) // 2  # "x\n" per worker

    def wait_formed(self):
        deadline = self.t0 + timeout
        while self.workers_started() < self.n:
            exited = [i for i, p in enumerate(self.procs) if p.poll() is not None]
            if exited:
                raise RuntimeError(f"{len(exited)} launcher(s) exited before the job formed; launcher "
                                   f"{exited[0]}:\n" + self.log(exited[0])[-2000:])
            if time.monotonic() > deadline:
                raise RuntimeError(f"{self.workers_started()} of {self.n} workers started within {timeout:.0f} s")
            time.sleep(0.02)
        return time.monotonic() - self.t0

    def formation_cpu(self):
        """(CPU seconds of every launcher since its start, of the store host's launcher or etcd): what
        forming the job cost, read right after it formed."""
        ticks = [cpu_ticks(p.pid) for p in self.procs]
        launchers = sum(t for t in ticks if t is not None) / tick
        host = ticks[0] / tick if self.host is not None and ticks[0] is not None else None
        if self.etcd_at_start is not None:
            now = cpu_ticks(etcd_pid)
            host = (now - self.etcd_at_start) / tick if now is not None else None
        return launchers, host

    def steady(self):
        """(cores of every launcher, cores of the store host or etcd, launchers that exited, requests
        and bytes per second at the store) over the window."""
        time.sleep(settle)
        before = [cpu_ticks(p.pid) for p in self.procs]
        etcd_before, traffic_before = (cpu_ticks(etcd_pid) if etcd_pid else None), etcd_traffic()
        t = time.monotonic()
        time.sleep(window)
        after = [cpu_ticks(p.pid) for p in self.procs]
        etcd_after, traffic_after = (cpu_ticks(etcd_pid) if etcd_pid else None), etcd_traffic()
        span = time.monotonic() - t
        requests = nbytes = None
        if traffic_before is not None and traffic_after is not None:
            requests, nbytes = ((a - b) / span for a, b in zip(traffic_after, traffic_before))
        elif self.listening is not None:
            requests, nbytes = store_rate(self.log(0), t - self.listening, t + span - self.listening)
        alive = [(b, a) for b, a in zip(before, after) if b is not None and a is not None]
        lost = sum(1 for p in self.procs if p.poll() is not None)
        total = sum(a - b for b, a in alive) / tick / span
        host = None
        if self.host is not None and before[0] is not None and after[0] is not None:
            host = (after[0] - before[0]) / tick / span
        if etcd_before is not None and etcd_after is not None:
            host = (etcd_after - etcd_before) / tick / span
        return total, host, lost, requests, nbytes

    def kill_one(self):
        """Seconds from a SIGKILL of the last launcher (and its worker) to the first survivor's exit
        and the last's; the lost node as the first survivor named it."""
        victim = self.procs[-1]
        os.killpg(victim.pid, signal.SIGKILL)
        t = time.monotonic()
        victim.wait()
        survivors = self.procs[:-1]
        first = None
        deadline = t + timeout
        while any(p.poll() is None for p in survivors):
            if first is None and any(p.poll() is not None for p in survivors):
                first = time.monotonic() - t
            if time.monotonic() > deadline:
                raise RuntimeError(f"survivors still running {timeout:.0f} s after a launcher's SIGKILL")
            time.sleep(0.02)
        last = time.monotonic() - t
        first = last if first is None else first
        named = re.search(r"(node \d+ \([^)]*\)) lost", self.log(0))
        codes = sorted({p.returncode for p in survivors})
        return first, last, named[1] if named else None, codes

    def close(self):
        for p in self.procs:
            if p.poll() is None:
                try:
                    os.killpg(p.pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
        for p in self.procs:
            p.wait()


def median(xs):
    xs = [x for x in xs if x is not None]
    return round(statistics.median(xs), 3) if xs else None


def wait_quiet():
    end = time.time() + 600
    while quiet is not None and os.getloadavg()[0] > quiet and time.time() < end:
        time.sleep(5)


def trial(n, tmp, k):
    wait_quiet()
    job = Job(n, tmp, k)
    try:
        formed = job.wait_formed()
        formation_cpu, formation_host_cpu = job.formation_cpu()
        cores, host, lost, requests, nbytes = job.steady()
        first, last, named, codes = job.kill_one() if lost == 0 and kill else (None, None, None, [])
        return {"formed_s": formed, "formation_cpu_s": formation_cpu, "formation_host_cpu_s": formation_host_cpu,
                "cores": cores, "host_cores": host, "lost": lost, "requests_per_s": requests,
                "bytes_per_s": nbytes,
                "noticed_s": first, "ended_s": last, "named": named, "exit_codes": codes}
    finally:
        job.close()


rows = []
with tempfile.TemporaryDirectory(prefix="ddp-scale-bench-") as tmp:
    for n in ns:
        results, errors = [], []
        for k in range(trials):
            try:
                r = trial(n, tmp, k)
            except RuntimeError as e:
                errors.append(str(e).splitlines()[0])
                print(f"N={n:>4} trial {k}: FAILED: {e}", flush=True)
                continue
            results.append(r)
            print(f"N={n:>4} trial {k}: formed {r['formed_s']:6.2f} s (CPU {r['formation_cpu_s']:.1f} s, "
                  f"store host {r['formation_host_cpu_s'] if r['formation_host_cpu_s'] is None else round(r['formation_host_cpu_s'], 1)} s)  steady {r['cores']:.3f} cores "
                  f"(store host {r['host_cores'] if r['host_cores'] is None else round(r['host_cores'], 3)}, "
                  f"{r['requests_per_s'] if r['requests_per_s'] is None else round(r['requests_per_s'])} req/s)  "
                  f"lost in window {r['lost']}  noticed {r['noticed_s']} s, all ended {r['ended_s']} s "
                  f"({r['named']}, exit {r['exit_codes']})", flush=True)
        row = {"bench": "scale", "launcher": label, "version": version(), "backend": backend, "nnodes": n,
               "trials": len(results), "formed_s": median([r["formed_s"] for r in results]),
               "formed_trials": [round(r["formed_s"], 3) for r in results],
               "formation_cpu_s": median([r["formation_cpu_s"] for r in results]),
               "formation_host_cpu_s": median([r["formation_host_cpu_s"] for r in results]),
               "steady_cores": median([r["cores"] for r in results]),
               "store_host_cores": median([r["host_cores"] for r in results]),
               "store_requests_per_s": median([r["requests_per_s"] for r in results]),
               "store_bytes_per_s": median([r["bytes_per_s"] for r in results]),
               "store_host": "etcd" if etcd_pid else ("none" if endpoint_env else "launcher 0"),
               "lost_in_window": sum(r["lost"] for r in results),
               "noticed_s": median([r["noticed_s"] for r in results]),
               "ended_s": median([r["ended_s"] for r in results]),
               "noticed_trials": [None if r["noticed_s"] is None else round(r["noticed_s"], 3) for r in results],
               "named": sorted({r["named"] for r in results if r["named"]}),
               "exit_codes": sorted({c for r in results for c in r["exit_codes"]}),
               "window_s": window, "settle_s": settle, "conf": conf, "args": " ".join(extra),
               "machine": {"cpu": cpu_model(), "online_cpus": os.cpu_count()},
               "load_avg": round(os.getloadavg()[0], 1), "date": time.strftime("%Y-%m-%d", time.gmtime())}
        if errors:
            row["note"] = f"{len(errors)} of {trials} trials failed: {errors[0]}"
        rows.append(row)

print(f"\n{'N':>5}  {'formed s':>9}  {'cores':>6}  {'host':>6}  {'req/s':>6}  {'noticed s':>9}  {'ended s':>8}  trials")
for r in rows:
    print(f"{r['nnodes']:>5}  {r['formed_s'] if r['formed_s'] is not None else '-':>9}  "
          f"{r['steady_cores'] if r['steady_cores'] is not None else '-':>6}  "
          f"{r['store_host_cores'] if r['store_host_cores'] is not None else '-':>6}  "
          f"{round(r['store_requests_per_s']) if r['store_requests_per_s'] is not None else '-':>6}  "
          f"{r['noticed_s'] if r['noticed_s'] is not None else '-':>9}  "
          f"{r['ended_s'] if r['ended_s'] is not None else '-':>8}  {r['trials']} {r.get('note', '')}")
print(f"CPU: {cpu_model()}, {os.cpu_count()} online; backend {backend}")
out = os.environ.get("OUT")
if out:
    with open(out, "w") as f:
        f.writelines(json.dumps(r) + "\n" for r in rows)
    print(f"rows written to {out}")
PY
