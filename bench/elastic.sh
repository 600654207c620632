#!/usr/bin/env bash
# Recovery times of ddp-launch beside torchrun 1.13 on the same PyTorch job (bench/elastic_job.py:
# gloo DDP, one line per completed step), two "nodes" = two launchers on localhost, one worker
# each, c10d rendezvous at 127.0.0.1, --monitor-interval 1, last_call_timeout=1. Per launcher,
# TRIALS trials (default 5), medians:
#   node-lost    --nnodes 1:2, both nodes training: SIGKILL one node (its launcher and its worker
#                at once) -> the first completed step of the world of 1
#   node-joined  then start a new node -> the first completed step of the world of 2
#   worker-killed  --nnodes 2 (static), --max-restarts 1: SIGKILL one worker -> the first
#                completed step of the restarted round (the restart path of a static job)
# A launcher that refuses --nnodes 1:2 gets only worker-killed (said so in its row).
# "in-place" is ddp-launch running the C++ probe tests/netns/elastic_probe.cc (ddp/elastic/elastic.h: a
# counter all_reduced and committed every step, 50 ms apart) that recovers in place: node-lost and
# node-joined only (path "in-place"; its workers are not restarted, so no Python import is timed).
# "cpp-restart" is ddp-launch running the same probe with --restart (a plain worker: no recovery in
# place; a failure exits and the launcher restarts it): the restart path with the same program.
# "cnn-in-place" and "cnn-restart" are ddp-launch running the demo (ddp-train-fashion-mnist, LibTorch,
# 1 thread, a checkpoint every 20 steps) with and without --elastic-in-place: a program whose
# restart costs LibTorch's load, the data set's and a checkpoint's read.
# torchrun is Debian's 1.13 through bench/torchrun_shim.py (1.13 does not start on Python 3.11).
#
# Usage: bench/elastic.sh [path/to/ddp-launch]   (default: $DDP_BIN_DIR or build/bin)
# Env: TRIALS (5), LAUNCHERS ("ddp-launch torchrun in-place cpp-restart cnn-in-place cnn-restart"),
#      SCENARIOS ("elastic static"),
#      OUT (a file for the rows, one JSON object per line, as bench/report.py reads elastic.jsonl;
#      default: none), TIMEOUT (s a trial may wait, 90), CONF (ddp-launch's --rdzv-conf,
#      "last_call_timeout=1"; torchrun 1.13 cannot set its heartbeats: it keeps that one).
set -euo pipefail

here=$(cd "$(dirname "$0")/.." && pwd)
launcher=${1:-${DDP_BIN_DIR:-$here/build/bin}/ddp-launch}
[ -x "$launcher" ] || { echo "elastic.sh: no ddp-launch at $launcher (build it first)" >&2; exit 2; }

probe=${DDP_TESTS_DIR:-$(dirname "$launcher")/../tests}/ddp_elastic_probe
exec /usr/bin/python3 - "$launcher" "$here/bench" "$probe" <<'PY'
import json, os, random, re, signal, socket, statistics, subprocess, sys, tempfile, time

ddp_launch, bench, probe = sys.argv[1], sys.argv[2], sys.argv[3]
python = "/usr/bin/python3"
job = [f"{bench}/elastic_job.py"]
trials = int(os.environ.get("TRIALS", "5"))
launchers = os.environ.get("LAUNCHERS", "ddp-launch torchrun in-place cpp-restart cnn-in-place cnn-restart").split()
PROBE_ARGS = {"in-place": ["0", "50", "--print-steps"], "cpp-restart": ["0", "50", "--restart"]}
demo = os.path.join(os.path.dirname(ddp_launch), "ddp-train-fashion-mnist")
IN_PLACE = ("in-place", "cnn-in-place")  # no worker restarted: no worker-killed scenario
SETUP = {"in-place": "1 C++ worker (tcp)", "cpp-restart": "1 C++ worker (tcp)",
         "cnn-in-place": "1 LibTorch CNN worker (the demo, tcp, 1 thread)",
         "cnn-restart": "1 LibTorch CNN worker (the demo, tcp, 1 thread)"}
tmp_dir = None  # per run: the demo's checkpoint directories
scenarios = os.environ.get("SCENARIOS", "elastic static").split()
timeout = float(os.environ.get("TIMEOUT", "90"))
CONF = os.environ.get("CONF", "last_call_timeout=1")  # ddp-launch's --rdzv-conf (torchrun's stays)
phases = random.Random(1)  # pause()
START_PROBE = re.compile(r"group pid=(\d+)")
STEP = re.compile(r"elastic_job step (\d+) rank (\d+) world (\d+) restart (\d+) t ([0-9.]+)")
START = re.compile(r"elastic_job start pid (\d+)")


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_listening(port, node):
    """Until something listens on 127.0.0.1:port (the first launcher hosts the store there)."""
    deadline = time.time() + timeout
    while time.time() < deadline and node.proc.poll() is None:
        with socket.socket() as s:
            if s.connect_ex(("127.0.0.1", port)) == 0:
                return
        time.sleep(0.05)
    raise TimeoutError(f"nothing listens on port {port}:\n{node.text()[-3000:]}")


def command(which, nnodes, port, run_id, restarts):
    """One node's launcher command line."""
    conf = "last_call_timeout=1" if which == "torchrun" else CONF
    if which == "torchrun":
        return [python, f"{bench}/torchrun_shim.py", "--nnodes", nnodes, "--nproc_per_node", "1",
                "--rdzv_backend", "c10d", "--rdzv_endpoint", f"127.0.0.1:{port}", "--rdzv_id", run_id,
                "--rdzv_conf", conf, "--monitor_interval", "1", "--max_restarts", str(restarts)] + job
    if which in PROBE_ARGS:
        program = [probe] + PROBE_ARGS[which]
    elif which.startswith("cnn-"):
        program = [demo, "--epochs", "1000", "--test-limit", "320", "--threads", "1", "--checkpoint",
                   os.path.join(tmp_dir, run_id + "-checkpoints"), "--checkpoint-every", "20", "--print-steps"]
        program += ["--elastic-in-place"] if which == "cnn-in-place" else []
    else:
        program = [python] + job
    return [ddp_launch, "--nnodes", nnodes, "--nproc-per-node", "1", "--rdzv-backend", "c10d",
            "--rdzv-endpoint", f"127.0.0.1:{port}", "--rdzv-id", run_id, "--rdzv-conf", conf,
            "--monitor-interval", "1", "--max-restarts", str(restarts)] + program


def children(pid):
    """The processes whose parent is pid."""
    out = []
    for d in os.listdir("/proc"):
        try:
            with open(f"/proc/{d}/stat") as f:
                if d.isdigit() and int(f.read().rsplit(")", 1)[1].split()[1]) == pid:
                    out.append(int(d))
        except (OSError, ValueError, IndexError):
            pass
    return out


class Node:
    """A launcher in its own session, its output in a file read as it grows."""

    def __init__(self, cmd, tmp, name):
        self.log = os.path.join(tmp, name + ".log")
        with open(self.log, "wb") as f:
            self.proc = subprocess.Popen(cmd, stdout=f, stderr=subprocess.STDOUT, start_new_session=True,
                                         env=dict(os.environ, PYTHONUNBUFFERED="1"))

    def text(self):
        with open(self.log, errors="replace") as f:
            return f.read()

    def steps(self):
        return [(int(m[1]), int(m[3]), int(m[4]), float(m[5])) for m in STEP.finditer(self.text())]

    def worker_pids(self):
        """Workers that said their pid, and the launcher's children now (the demo says none)."""
        said = [int(p) for p in START.findall(self.text()) + START_PROBE.findall(self.text())]
        return said + [p for p in children(self.proc.pid) if p not in said]

    def kill(self, sig=signal.SIGKILL):
        """The whole node at once: the launcher's session and every worker it started."""
        for pid in self.worker_pids():
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
        for pid in self.worker_pids():  # workers of other sessions (ddp-launch starts them so)
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass


def pause():
    """1 to 2 s, drawn per trial (seeded: the same in every run): each event falls at another phase
    of the launchers' periodic checks (heartbeats, --monitor-interval), so the medians are not
    those of one lucky or unlucky phase."""
    time.sleep(1.0 + phases.random())


def first_step(nodes, after, pred):
    """Unix time of the first step completed after `after` that satisfies pred(world, restart)."""
    deadline = time.time() + timeout
    while time.time() < deadline:
        ts = [t for n in nodes for (_, w, r, t) in n.steps() if t > after and pred(w, r)]
        if ts:
            return min(ts)
        time.sleep(0.05)
    raise TimeoutError("no such step within %.0f s:\n%s" % (timeout, "\n".join(n.text()[-3000:] for n in nodes)))


def elastic_trial(which, tmp, k):
    """(node-lost s, node-joined s) of one trial."""
    port, run_id = free_port(), f"elastic-{which}-{os.getpid()}-{k}"
    cmd = command(which, "1:2", port, run_id, restarts=3)
    host = Node(cmd, tmp, f"{which}-{k}-a")
    wait_listening(port, host)  # this one hosts the store: the other node is the one lost
    other = Node(cmd, tmp, f"{which}-{k}-b")
    nodes = [host, other]
    try:
        first_step(nodes, 0, lambda w, r: w == 2)
        pause()  # a few steps of the world of 2
        lost_at = time.time()
        other.kill()
        lost = first_step([host], lost_at, lambda w, r: w == 1) - lost_at
        other.proc.wait()
        pause()
        joined_at = time.time()
        new = Node(cmd, tmp, f"{which}-{k}-c")
        nodes.append(new)
        joined = first_step([host, new], joined_at, lambda w, r: w == 2) - joined_at
        return lost, joined
    finally:
        for n in nodes:
            n.end()


def static_trial(which, tmp, k):
    """Seconds from a worker's SIGKILL to the restarted round's first step."""
    port, run_id = free_port(), f"static-{which}-{os.getpid()}-{k}"
    cmd = command(which, "2", port, run_id, restarts=1)
    host = Node(cmd, tmp, f"{which}-{k}-s0")
    wait_listening(port, host)
    other = Node(cmd, tmp, f"{which}-{k}-s1")
    nodes = [host, other]
    try:
        first_step(nodes, 0, lambda w, r: w == 2)
        pause()
        pid = other.worker_pids()[-1]
        killed_at = time.time()
        os.kill(pid, signal.SIGKILL)
        return first_step(nodes, killed_at, lambda w, r: r >= 1) - killed_at
    finally:
        for n in nodes:
            n.end()


def elastic_supported(which):
    if which == "torchrun":
        return True
    program = probe if which in PROBE_ARGS else demo if which.startswith("cnn-") else None
    if program and not os.access(program, os.X_OK):
        return False
    p = subprocess.run([ddp_launch, "--nnodes", "1:2", "--rdzv-backend", "c10d", "--rdzv-endpoint",
                        "127.0.0.1:1", "--dry-run", "/bin/true"], capture_output=True, text=True)
    return "not supported" not in p.stdout + p.stderr


def cpu_model():
    with open("/proc/cpuinfo") as f:
        m = re.search(r"model name\s*:\s*(.*)", f.read())
    return m[1].strip() if m else "unknown"


def version(which):
    if which == "torchrun":
        import torch
        return "torchrun " + torch.__version__ + " (bench/torchrun_shim.py)"
    p = subprocess.run([ddp_launch, "--version"], capture_output=True, text=True)
    v = (p.stdout.strip() or "ddp-launch").splitlines()[0]
    if which == "in-place":
        return v + " with tests/netns/elastic_probe.cc (C++, ddp/elastic.h)"
    if which == "cpp-restart":
        return v + " with tests/netns/elastic_probe.cc --restart (C++, no recovery in place)"
    if which.startswith("cnn-"):
        return v + " with ddp-train-fashion-mnist" + (" --elastic-in-place" if which == "cnn-in-place" else "")
    return v


def row(which, scenario, times, note=""):
    r = {"bench": "elastic", "launcher": which, "version": version(which),
         "path": "in-place" if which in IN_PLACE else "restart",
         "scenario": scenario, "trials": [round(t, 3) for t in times],
         "median_s": round(statistics.median(times), 3) if times else None,
         "min_s": round(min(times), 3) if times else None, "max_s": round(max(times), 3) if times else None,
         "machine": {"cpu": cpu_model(), "online_cpus": os.cpu_count()},
         "load_avg": round(os.getloadavg()[0], 1),
         "setup": "2 launchers on localhost, " + SETUP.get(which, "1 PyTorch worker (gloo)") +
                  " each, c10d rendezvous, --monitor-interval 1, --rdzv-conf " +
                  ("last_call_timeout=1" if which == "torchrun" else CONF), "date": time.strftime("%Y-%m-%d", time.gmtime())}
    if note:
        r["note"] = note
    return r


rows = []
with tempfile.TemporaryDirectory(prefix="ddp-elastic-bench-") as tmp:
    tmp_dir = tmp
    for which in launchers:
        if "elastic" in scenarios:
            if elastic_supported(which):
                lost, joined, failed = [], [], 0
                for k in range(trials):
                    try:
                        a, b = elastic_trial(which, tmp, k)
                    except TimeoutError as e:
                        failed += 1
                        print(f"{which:>10} trial {k}: FAILED: {e}", flush=True)
                        continue
                    lost.append(a)
                    joined.append(b)
                    print(f"{which:>10} trial {k}: node-lost {a:6.2f} s  node-joined {b:6.2f} s", flush=True)
                note = f"{failed} of {trials} trials failed (no step within {timeout:.0f} s)" if failed else ""
                rows += [row(which, "node-lost", lost, note), row(which, "node-joined", joined, note)]
            else:
                print(f"{which:>10}: refuses --nnodes 1:2 (elastic node counts not in this build): skipped")
                for scenario in ("node-lost", "node-joined"):
                    rows.append(row(which, scenario, [], "elastic node counts not supported by this build"))
        if "static" in scenarios and which not in IN_PLACE:
            killed, failed = [], 0
            for k in range(trials):
                try:
                    killed.append(static_trial(which, tmp, k))
                except TimeoutError as e:
                    failed += 1
                    print(f"{which:>10} trial {k}: FAILED: {e}", flush=True)
                    continue
                print(f"{which:>10} trial {k}: worker-killed {killed[-1]:6.2f} s", flush=True)
            note = f"{failed} of {trials} trials failed (no step within {timeout:.0f} s)" if failed else ""
            rows.append(row(which, "worker-killed", killed, note))

print(f"\n{'launcher':>10}  {'scenario':>14}  {'median s':>9}  {'min':>6}  {'max':>6}  trials")
for r in rows:
    if r["median_s"] is None:
        print(f"{r['launcher']:>10}  {r['scenario']:>14}  {'-':>9}  {r.get('note', '')}")
    else:
        print(f"{r['launcher']:>10}  {r['scenario']:>14}  {r['median_s']:>9.2f}  {r['min_s']:>6.2f}  "
              f"{r['max_s']:>6.2f}  {len(r['trials'])}")
print(f"CPU: {cpu_model()}")
out = os.environ.get("OUT")
if out:
    with open(out, "w") as f:
        f.writelines(json.dumps(r) + "\n" for r in rows)
        f.write("\n")
    print(f"rows written to {out}")
PY
