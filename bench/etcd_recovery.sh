#!/usr/bin/env bash
# Recovery from the loss of the first node, with a highly available rendezvous: ddp-launch's
# --rdzv-backend etcd (etcd's v3 API) beside torchrun 1.13's etcd-v2 backend (etcd's v2 API,
# through Debian's python3-etcd) on the same machine, and torchrun's c10d, whose first node hosts
# the store (its survivors cannot go on). 3 launchers on localhost, --nnodes 2:3, one worker each,
# one etcd 3.4 member (--enable-v2: torchrun's backend needs it) started fresh per trial. Launcher
# 1 is started first (node 0 of our round; c10d's store host), the others once it is in; when all
# three workers have stepped at world 3 and 1-2 s more (drawn, seeded), launcher 1 and its worker
# are SIGKILLed at once; the time to the survivors' first completed step at world 2.
#   in-place          ddp-launch running tests/netns/elastic_probe.cc (ddp/elastic/elastic.h, in place)
#   restart           ddp-launch running bench/elastic_job.py (PyTorch DDP over gloo), restarted
#   torchrun-etcd-v2  torchrun (bench/torchrun_shim.py) --rdzv_backend etcd-v2, the same script
#   torchrun-c10d     torchrun --rdzv_backend c10d, the same script: the survivors' exit (their
#                     codes, and when) instead of a time, unless one steps at world 2
# ddp-launch and torchrun: --monitor-interval 1, --max-restarts 3, --rdzv-conf CONF; torchrun
# keeps its own heartbeats (1.13 cannot set them). One JSON row per path (bench/report.py renders
# etcd_recovery.jsonl as a table on docs/benchmarks.md).
#
# Usage: bench/etcd_recovery.sh [path/to/ddp-launch]   (default: $DDP_BIN_DIR or build/bin)
# Env: TRIALS (3), PATHS ("in-place restart torchrun-etcd-v2 torchrun-c10d"), OUT (a file for the
#      rows), TIMEOUT (s a trial may wait, 90), CONF ("last_call_timeout=1"), ETCD (/usr/bin/etcd),
#      LOGS (a directory to keep the launchers' and etcd's logs in; default: removed).
set -euo pipefail

here=$(cd "$(dirname "$0")/.." && pwd)
launcher=${1:-${DDP_BIN_DIR:-$here/build/bin}/ddp-launch}
[ -x "$launcher" ] || { echo "etcd_recovery.sh: no ddp-launch at $launcher (build it first)" >&2; exit 2; }
[ -x "${ETCD:-/usr/bin/etcd}" ] || { echo "etcd_recovery.sh: no etcd at ${ETCD:-/usr/bin/etcd}" >&2; exit 2; }
/usr/bin/python3 -c 'import etcd, torch.distributed' ||
  { echo "etcd_recovery.sh: /usr/bin/python3 needs torch and python3-etcd" >&2; exit 2; }

probe=${DDP_TESTS_DIR:-$(dirname "$launcher")/../tests}/ddp_elastic_probe
exec /usr/bin/python3 - "$launcher" "$here/bench" "$probe" <<'PY'
import json, os, random, re, signal, socket, statistics, subprocess, sys, tempfile, time

ddp_launch, bench, probe = sys.argv[1], sys.argv[2], sys.argv[3]
python = "/usr/bin/python3"
etcd_bin = os.environ.get("ETCD", "/usr/bin/etcd")
trials = int(os.environ.get("TRIALS", "3"))
paths = os.environ.get("PATHS", "in-place restart torchrun-etcd-v2 torchrun-c10d").split()
timeout = float(os.environ.get("TIMEOUT", "90"))
CONF = os.environ.get("CONF", "last_call_timeout=1")
phases = random.Random(1)
STEP = re.compile(r"elastic_job step (\d+) rank (\d+) world (\d+) restart (\d+) t ([0-9.]+)")
PIDS = re.compile(r"(?:elastic_job start pid |group pid=)(\d+)")
JOB = [f"{bench}/elastic_job.py"]


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def listening(port):
    with socket.socket() as s:
        return s.connect_ex(("127.0.0.1", port)) == 0


def children(pid):
    out = []
    for d in os.listdir("/proc"):
        try:
            with open(f"/proc/{d}/stat") as f:
                if d.isdigit() and int(f.read().rsplit(")", 1)[1].split()[1]) == pid:
                    out.append(int(d))
        except (OSError, ValueError, IndexError):
            pass
    return out


class Proc:
    """A process in its own session, its output in a file read as it grows."""

    def __init__(self, cmd, tmp, name):
        self.log = os.path.join(tmp, name + ".log")
        with open(self.log, "wb") as f:
            self.proc = subprocess.Popen(cmd, stdout=f, stderr=subprocess.STDOUT, start_new_session=True,
                                         env=dict(os.environ, PYTHONUNBUFFERED="1"))

    def text(self):
        with open(self.log, errors="replace") as f:
            return f.read()

    def steps(self):
        return [(int(m[2]), int(m[3]), float(m[5])) for m in STEP.finditer(self.text())]

    def pids(self):
        said = [int(p) for p in PIDS.findall(self.text())]
        return said + [p for p in children(self.proc.pid) if p not in said]

    def kill(self, sig=signal.SIGKILL):
        """The launcher's session and every worker it said it started (its own sessions too)."""
        for pid in self.pids():
            try:
                os.kill(pid, sig)
            except ProcessLookupError:
                pass
        try:
            os.killpg(self.proc.pid, sig)
        except ProcessLookupError:
            pass

    def end(self):
        self.kill(signal.SIGTERM)
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.kill()
            self.proc.wait()
        for pid in self.pids():
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass


def wait_for(what, cond, procs):
    deadline = time.time() + timeout
    while time.time() < deadline:
        v = cond()
        if v:
            return v
        time.sleep(0.05)
    raise TimeoutError(f"{what}: not within {timeout:.0f} s:\n" + "\n".join(p.text()[-2500:] for p in procs))


def start_etcd(tmp, k):
    client, peer = free_port(), free_port()
    url, purl = f"http://127.0.0.1:{client}", f"http://127.0.0.1:{peer}"
    e = Proc([etcd_bin, "--name", "e", "--data-dir", os.path.join(tmp, f"etcd{k}"), "--enable-v2",
              "--listen-client-urls", url, "--advertise-client-urls", url, "--listen-peer-urls", purl,
              "--initial-advertise-peer-urls", purl, "--initial-cluster", f"e={purl}"], tmp, f"etcd{k}")
    wait_for("etcd serving", lambda: subprocess.run(
        ["curl", "-sf", f"{url}/health"], capture_output=True).returncode == 0, [e])
    return e, f"127.0.0.1:{client}"


def command(path, endpoint, run_id):
    if path.startswith("torchrun"):
        backend = "c10d" if path == "torchrun-c10d" else "etcd-v2"
        return [python, f"{bench}/torchrun_shim.py", "--nnodes", "2:3", "--nproc_per_node", "1",
                "--rdzv_backend", backend, "--rdzv_endpoint", endpoint, "--rdzv_id", run_id,
                "--rdzv_conf", "last_call_timeout=1", "--monitor_interval", "1", "--max_restarts", "3"] + JOB
    program = [probe, "0", "50", "--print-steps"] if path == "in-place" else [python] + JOB
    return [ddp_launch, "--nnodes", "2:3", "--nproc-per-node", "1", "--rdzv-backend",
            "c10d" if path == "ours-c10d" else "etcd", "--rdzv-endpoint", endpoint, "--rdzv-id", run_id,
            "--rdzv-conf", CONF, "--monitor-interval", "1", "--max-restarts", "3"] + program


def trial(path, tmp, k):
    """(seconds to the survivors' first step at world 2, or None; a note)."""
    run_id = f"etcdrec{os.getpid()}{k}{path.replace('-', '')}"
    procs = []
    try:
        if path == "torchrun-c10d":
            endpoint = f"127.0.0.1:{free_port()}"
        else:
            e, endpoint = start_etcd(tmp, f"{path}{k}")
            procs.append(e)
        cmd = command(path, endpoint, run_id)
        first = Proc(cmd, tmp, f"{path}-{k}-1")
        nodes = [first]
        procs.append(first)
        if path == "torchrun-c10d":
            host, port = endpoint.split(":")
            wait_for("launcher 1's store listening", lambda: listening(int(port)), [first])
        elif path == "torchrun-etcd-v2":  # its first node's state in etcd (v2 keys)
            wait_for("launcher 1 in etcd", lambda: run_id in subprocess.run(
                ["curl", "-s", f"http://{endpoint}/v2/keys/?recursive=true"], capture_output=True,
                text=True).stdout, [first])
        else:
            wait_for("launcher 1 joining round 0", lambda: "joining round 0" in first.text(), [first])
        for i in (2, 3):
            nodes.append(Proc(cmd, tmp, f"{path}-{k}-{i}"))
            procs.append(nodes[-1])
        wait_for("a step at world 3 on every node",
                 lambda: all(any(w == 3 for (_, w, _) in n.steps()) for n in nodes), nodes)
        time.sleep(1.0 + phases.random())
        rank = min((r for (r, w, _) in first.steps() if w == 3), default=None)
        killed_at = time.time()
        first.kill()
        survivors = nodes[1:]

        def outcome():
            ts = [t for n in survivors for (_, w, t) in n.steps() if w == 2 and t > killed_at]
            if ts:
                return ("step", min(ts))
            if all(n.proc.poll() is not None for n in survivors):
                return ("exited", time.time())
            return None

        what, t = wait_for("a step at world 2 or the survivors' exit", outcome, survivors)
        if what == "step":
            return t - killed_at, f"launcher 1's worker was rank {rank}"
        rcs = ", ".join(str(n.proc.returncode) for n in survivors)
        return None, f"the survivors exited ({rcs}) within {t - killed_at:.1f} s, no step at world 2"
    finally:
        for p in reversed(procs):
            p.end()


def cpu_model():
    with open("/proc/cpuinfo") as f:
        m = re.search(r"model name\s*:\s*(.*)", f.read())
    return m[1].strip() if m else "unknown"


def version(path):
    import torch
    if path.startswith("torchrun"):
        return f"torchrun {torch.__version__} (bench/torchrun_shim.py)"
    v = subprocess.run([ddp_launch, "--version"], capture_output=True, text=True).stdout.strip().splitlines()
    return (v[0] if v else "ddp-launch") + (" with tests/netns/elastic_probe.cc" if path == "in-place" else "")


def etcd_version():
    v = re.search(r"etcd Version: (\S+)", subprocess.run([etcd_bin, "--version"], capture_output=True, text=True).stdout)
    return "etcd " + (v[1] if v else "(version unknown)")


def row(path, times, notes):
    r = {"bench": "etcd-recovery", "path": path, "version": version(path), "scenario": "first-node-lost",
         "trials": [round(t, 3) for t in times],
         "median_s": round(statistics.median(times), 3) if times else None,
         "min_s": round(min(times), 3) if times else None, "max_s": round(max(times), 3) if times else None,
         "notes": notes, "machine": {"cpu": cpu_model(), "online_cpus": os.cpu_count()},
         "load_avg": round(os.getloadavg()[0], 1), "etcd": etcd_version(),
         "conf": "last_call_timeout=1" if path.startswith("torchrun") else CONF,
         "setup": "3 launchers on localhost, --nnodes 2:3, 1 worker each, one etcd member (--enable-v2), "
                  "--monitor-interval 1, --max-restarts 3",
         "date": time.strftime("%Y-%m-%d", time.gmtime())}
    return r


rows = []
with tempfile.TemporaryDirectory(prefix="ddp-etcd-recovery-") as tmp:
    tmp = os.environ.get("LOGS") or tmp  # LOGS: a directory to keep every process's log in
    for path in paths:
        times, notes = [], []
        for k in range(trials):
            try:
                s, note = trial(path, tmp, k)
            except TimeoutError as e:
                s, note = None, f"failed: {str(e).splitlines()[0]}"
                print(e, flush=True)
            if s is not None:
                times.append(s)
            notes.append(note)
            print(f"{path:>17} trial {k}: " + (f"{s:6.2f} s" if s is not None else "-") + f"  ({note})", flush=True)
        rows.append(row(path, times, notes))

print(f"\n{'path':>17}  {'median s':>9}  {'min':>6}  {'max':>6}  trials")
for r in rows:
    if r["median_s"] is None:
        print(f"{r['path']:>17}  {'-':>9}  {r['notes'][0]}")
    else:
        print(f"{r['path']:>17}  {r['median_s']:>9.2f}  {r['min_s']:>6.2f}  {r['max_s']:>6.2f}  {len(r['trials'])}")
print(f"CPU: {cpu_model()}")
out = os.environ.get("OUT")
if out:
    with open(out, "w") as f:
        f.writelines(json.dumps(r) + "\n" for r in rows)
    print(f"rows written to {out}")
PY
