#!/usr/bin/env bash
# One run, one table: ours (tcp, gloo, mpi) beside the peers called directly (gloo-direct,
# mpi-direct), same op, same sizes, same machine, back to back, all timed by the same harness
# (ddp-bench collective: per-op time of a loop of --iters ops, max over ranks, median of
# --repeats loops); ratios against mpi-direct and gloo-direct (< 1.00 means ours is faster).
# Only rows that say "correct": true are tabulated; any other row, or a run that failed, makes
# this script exit non-zero, and that backend shows "-".
#
#   bench/collectives.sh [--op all_reduce] [--world-size 2] [--sizes 1K,...,256M] [--iters 20] [--repeats 5]
#                        [--rounds 1] [--backends tcp,gloo,mpi,gloo-direct,mpi-direct] [--bin build/bin/ddp-bench]
#
# --rounds R runs every backend R times, interleaved, and reports the median of the R medians
# (the machine is noisy). Backends that were not built show "-". Raw JSON lines go to
# $OUT_JSON (default: a temp file, path printed at the end).
set -euo pipefail

op=all_reduce world=2 iters=20 repeats=5 rounds=1
sizes=1K,4K,16K,64K,256K,1M,4M,16M,64M,256M
backends=tcp,gloo,mpi,gloo-direct,mpi-direct
bin="$(dirname "$0")/../build/bin/ddp-bench"
while [[ $# -gt 0 ]]; do
  case "$1" in
    --op) op=$2; shift 2 ;;
    --world-size) world=$2; shift 2 ;;
    --sizes) sizes=$2; shift 2 ;;
    --iters) iters=$2; shift 2 ;;
    --repeats) repeats=$2; shift 2 ;;
    --rounds) rounds=$2; shift 2 ;;
    --backends) backends=$2; shift 2 ;;
    --bin) bin=$2; shift 2 ;;
    -h|--help) sed -n '2,16p' "$0"; exit 0 ;;
    *) echo "collectives.sh: unknown argument $1" >&2; exit 2 ;;
  esac
done
[[ -x "$bin" ]] || { echo "collectives.sh: $bin not found (build ddp-bench first)" >&2; exit 2; }
out_json=${OUT_JSON:-$(mktemp /tmp/ddp-collectives-XXXXXX.jsonl)}
: > "$out_json"

status=0
for ((r = 1; r <= rounds; r++)); do
  for b in ${backends//,/ }; do
    echo "round $r/$rounds: $op $b, $world ranks" >&2
    if ! "$bin" collective --op "$op" --backend "$b" --sizes "$sizes" --iters "$iters" \
         --repeats "$repeats" --world-size "$world" --format json >> "$out_json"; then
      echo "collectives.sh: $b failed (not built, or a wrong result: see above)" >&2
      status=1
    fi
  done
done

python3 - "$out_json" "$backends" "$op" "$world" "$rounds" <<'PY' || status=1
import json, statistics, sys
path, backends, op, world, rounds = sys.argv[1], sys.argv[2].split(","), sys.argv[3], sys.argv[4], sys.argv[5]
runs = {}
refused = 0
for line in open(path):
    line = line.strip()
    if not line.startswith("{"):
        continue
    j = json.loads(line)
    if j.get("correct") is not True:
        print(f"collectives.sh: REFUSED a row that is not correct: {line}", file=sys.stderr)
        refused += 1
        continue
    runs.setdefault((j["backend"], j["bytes"]), []).append(j["median_us"])
med = {k: statistics.median(v) for k, v in runs.items()}
sizes = sorted({b for (_, b) in med})
def human(n):
    for unit, div in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= div and n % div == 0:
            return f"{n // div} {unit}"
    return f"{n} B"
def fmt(us):
    return "-" if us is None else (f"{us:.1f} µs" if us < 1000 else f"{us / 1000:.2f} ms")
ours = [b for b in backends if not b.endswith("-direct")]
peers = [b for b in backends if b.endswith("-direct")]
print(f"\n{op}, {world} ranks, float32, max over ranks of per-op time, median of {rounds} run(s) of per-size medians\n")
head = ["bytes"] + backends + [f"{o}/{p}" for p in peers for o in ours]
print("| " + " | ".join(head) + " |")
print("|" + "---|" * len(head))
for s in sizes:
    row = [human(s)] + [fmt(med.get((b, s))) for b in backends]
    for p in peers:
        for o in ours:
            a, b = med.get((o, s)), med.get((p, s))
            row.append("-" if a is None or b is None or b == 0 else f"{a / b:.2f}")
    print("| " + " | ".join(row) + " |")
if refused:
    sys.exit(f"collectives.sh: {refused} row(s) refused (not correct)")
PY
echo "raw results: $out_json" >&2
exit $status
