#!/usr/bin/env bash
# Start-up cost of ddp-launch beside mpirun, measured in the same run:
#   ddp-launch --standalone --nproc-per-node N /bin/true
#   mpirun -np N --oversubscribe [--allow-run-as-root] /bin/true
# for N = 2, 8, 32 (override: NS="2 4"), RUNS timed runs each after WARMUP untimed ones, the
# two commands alternating run by run so a noisy machine's drift hits both alike.
# Prints each one's median wall time and ddp-launch's ratio to mpirun (< 1: faster).
# Targets (issues 4 and 55): <= 15 ms at N = 2, faster than mpirun at every N.
# MPIRUN=0 leaves mpirun out. BEFORE=path/to/other/ddp-launch alternates a second launcher (an older build) with the two.
# OUT=file.jsonl appends one JSON row per command and N (median, min, max, runs, load average,
# the machine as ddp-bench describes it: ddp-bench must be beside ddp-launch).
#
# Usage: bench/launch.sh [path/to/ddp-launch]   (default: $DDP_BIN_DIR or build/bin)
# Each run has a TIMEOUT (s): Open MPI 4.1 sometimes hangs at -np 32 on a loaded machine; such
# runs are killed and counted as "hung", not timed. The harness (Python, vfork+exec, wait) adds
# the same small overhead to both: its cost for /bin/true is printed as the floor.
set -euo pipefail

here=$(cd "$(dirname "$0")/.." && pwd)
launcher=${1:-${DDP_BIN_DIR:-$here/build/bin}/ddp-launch}
[ -x "$launcher" ] || { echo "launch.sh: no ddp-launch at $launcher (build it first)" >&2; exit 2; }

exec python3 - "$launcher" <<'PY'
import json, os, shutil, statistics, subprocess, sys, time

launcher = sys.argv[1]
ns = [int(n) for n in os.environ.get("NS", "2 8 32").split()]
runs = int(os.environ.get("RUNS", "30"))
warmup = int(os.environ.get("WARMUP", "3"))
timeout = float(os.environ.get("TIMEOUT", "20"))
before = os.environ.get("BEFORE")
out = os.environ.get("OUT")
mpirun = shutil.which("mpirun") if os.environ.get("MPIRUN", "1") != "0" else None
mpi_flags = ["--oversubscribe"] + (["--allow-run-as-root"] if os.geteuid() == 0 else [])

def once(cmd):
    """Wall seconds of one run, or None when it hung (killed after TIMEOUT)."""
    t0 = time.perf_counter()
    p = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    try:
        p.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(p.pid, 9)
        p.wait()
        return None
    t = time.perf_counter() - t0
    if p.returncode != 0:
        sys.exit(f"launch.sh: {' '.join(cmd)} exited with {p.returncode}")
    return t

def measure(cmds):
    """Alternates the commands run by run; returns per command (median ms, hung count)."""
    times = [[] for _ in cmds]
    hung = [0 for _ in cmds]
    for i in range(warmup + runs):
        for k, cmd in enumerate(cmds):
            t = once(cmd)
            if i < warmup:
                continue
            if t is None:
                hung[k] += 1
            else:
                times[k].append(t * 1e3)
    return [(statistics.median(t) if t else float("nan"), h, t) for t, h in zip(times, hung)]

def machine():
    """ddp-bench's description of this machine (the rows of bench/results carry it)."""
    bench = os.path.join(os.path.dirname(launcher), "ddp-bench")
    text = subprocess.run([bench, "collective", "-n", "1", "--sizes", "4", "--iters", "1", "--repeats", "1",
                           "--warmup", "0"], capture_output=True, text=True, check=True).stdout
    return json.loads(text.splitlines()[0])["machine"]

def write(name, cmd, n, res, load):
    m, h, t = res
    row = {"launcher": name, "nproc": n, "median_ms": round(m, 3), "min_ms": round(min(t), 3) if t else None,
           "max_ms": round(max(t), 3) if t else None, "runs": len(t), "hung": h, "load_avg": round(load, 1),
           "command": " ".join([os.path.basename(cmd[0])] + cmd[1:]), "machine": host}
    with open(out, "a") as f:
        f.write(json.dumps(row) + "\n")

load = os.getloadavg()[0]
host = machine() if out else None
print(f"ddp-launch: {launcher}" + (f"; before: {before}" if before else ""))
print(f"machine: {os.cpu_count()} CPUs, load average {load:.1f}; {runs} runs per point (median)")
(floor, _, _), = measure([["/bin/true"]])
print(f"harness floor (/bin/true alone): {floor:.2f} ms")
print(f"{'N':>4}  {'ddp-launch (ms)':>16}" + (f"  {'mpirun (ms)':>16}  {'ratio':>7}" if mpirun else "")
      + (f"  {'before (ms)':>12}" if before else ""))
for n in ns:
    ours = [launcher, "--standalone", "--nproc-per-node", str(n), "/bin/true"]
    theirs = [mpirun, "-np", str(n)] + mpi_flags + ["/bin/true"]
    old = [before] + ours[1:]
    named = [("ddp-launch", ours)] + ([("mpirun", theirs)] if mpirun else []) + ([("ddp-launch before", old)] if before else [])
    load_n = os.getloadavg()[0]
    res = measure([c for _, c in named])
    (o, oh, _) = res[0]
    line = f"{n:>4}  {o:>16.2f}"
    if mpirun:
        (m, mh, _) = res[1]
        line += f"  {m:>16.2f}  {o / m:>7.3f}"
        if mh:
            line += f"   (mpirun hung {mh}/{runs} runs: killed after {timeout:.0f} s, not counted)"
    if before:
        line += f"  {res[-1][0]:>12.2f}"
    if oh:
        line += f"   (ddp-launch hung {oh}/{runs})"
    print(line, flush=True)
    if out:
        for (name, cmd), r in zip(named, res):
            write(name, cmd, n, r, (load_n + os.getloadavg()[0]) / 2)
PY
