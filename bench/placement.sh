#!/usr/bin/env bash
# Where the workers run, and what it costs a 1 MiB all_reduce between 2 ranks on this host:
#   ddp-launch --standalone --nproc-per-node 2 [--cpu-bind none|cores] ddp-bench collective ...
#   mpirun -np 2 [--bind-to none] ddp-bench collective --backend mpi-direct ...  (Open MPI's default
#     binds each of 2 ranks to a core)
# Each ROUNDS round runs every placement once, in turn, so a noisy machine's drift hits all alike;
# a run's figure is ddp-bench's median over its --repeats loops of --iters ops. SHARED=1 adds the
# same with two jobs at once (a node shared by two jobs: with --cpu-bind each job splits the same
# cores, so their ranks stack). Rows (JSON, one per placement): the median, min and max of the
# rounds' figures and every round's, the load average before and after, ddp-bench's machine.
#
# Usage: bench/placement.sh [build/bin]   env: ROUNDS (15), SIZE (1M), ITERS (50), REPEATS (7),
#        SHARED (0), OUT (a .jsonl to append to; default: stdout only)
set -euo pipefail

here=$(cd "$(dirname "$0")/.." && pwd)
bin=${1:-${DDP_BIN_DIR:-$here/build/bin}}
[ -x "$bin/ddp-launch" ] && [ -x "$bin/ddp-bench" ] || {
  echo "placement.sh: build ddp-launch and ddp-bench first ($bin)" >&2
  exit 2
}

exec /usr/bin/python3 - "$bin" <<'PY'
import json, os, shutil, statistics, subprocess, sys

bin_dir = sys.argv[1]
rounds = int(os.environ.get("ROUNDS", "15"))
size = os.environ.get("SIZE", "1M")
iters, repeats = os.environ.get("ITERS", "50"), os.environ.get("REPEATS", "7")
shared = os.environ.get("SHARED", "0") == "1"
out = os.environ.get("OUT")
bench = [f"{bin_dir}/ddp-bench", "collective", "--sizes", size, "--iters", iters, "--repeats", repeats]
launch = [f"{bin_dir}/ddp-launch", "--standalone", "--nproc-per-node", "2"]
mpirun = shutil.which("mpirun")
root = ["--allow-run-as-root"] if os.geteuid() == 0 else []

placements = {
    "ddp-launch, unbound (--cpu-bind none)": launch + ["--cpu-bind", "none"] + bench,
    "ddp-launch --cpu-bind cores": launch + ["--cpu-bind", "cores"] + bench,
}
if mpirun:
    placements["mpirun (binds 2 ranks to cores)"] = [mpirun, "-np", "2"] + root + bench + ["--backend", "mpi-direct"]
    placements["mpirun --bind-to none"] = [mpirun, "-np", "2", "--bind-to", "none"] + root + bench + [
        "--backend", "mpi-direct"]

def run(cmds):
    """Runs the commands at once; each one's row (ddp-bench prints one per size)."""
    procs = [subprocess.Popen(c, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True) for c in cmds]
    rows = []
    for c, p in zip(cmds, procs):
        text, _ = p.communicate(timeout=300)
        if p.returncode != 0:
            sys.exit(f"placement.sh: {' '.join(c)} exited with {p.returncode}")
        got = [json.loads(l) for l in text.splitlines() if l.startswith("{")]
        if len(got) != 1 or got[0].get("correct") is not True:
            sys.exit(f"placement.sh: {' '.join(c)}: want one correct row, got {got}")
        rows.append(got[0])
    return rows

jobs = [1, 2] if shared else [1]
figures = {(name, j): [] for name in placements for j in jobs}
machine = {}
load_before = os.getloadavg()[0]
for _ in range(rounds):
    for name, cmd in placements.items():
        for j in jobs:
            rows = run([cmd] * j)
            machine = rows[0]["machine"]
            figures[(name, j)].append(max(r["median_us"] for r in rows))
load_after = os.getloadavg()[0]
for (name, j), f in figures.items():
    row = {"placement": name, "jobs": j, "bytes": rows[0]["bytes"], "world_size": 2, "rounds": rounds,
           "iters": int(iters), "repeats": int(repeats), "median_us": statistics.median(f), "min_us": min(f),
           "max_us": max(f), "per_round_us": [round(x, 1) for x in f],
           "load_avg": [round(load_before, 1), round(load_after, 1)], "machine": machine,
           "command": " ".join(os.path.basename(a) if a.startswith(bin_dir) else a for a in placements[name])}
    line = json.dumps(row)
    print(line, flush=True)
    if out:
        with open(out, "a") as fh:
            fh.write(line + "\n")
PY
