#!/usr/bin/env bash
# Start-up cost of ddp-launch beside mpirun, measured in the same run:
#   ddp-launch --standalone --nproc-per-node N /bin/true
#   mpirun -np N --allow-run-as-root --oversubscribe /bin/true
# for N = 2, 8, 32 (override with NS="2 4"), RUNS runs each after WARMUP warm-up runs.
# Prints the median wall time of each, and ddp-launch's ratio to mpirun (< 1: faster).
# Targets (issue 4): <= 15 ms at N = 2, faster than mpirun at every N.
#
# Usage: bench/launch.sh [path/to/ddp-launch]   (default: $DDP_BIN_DIR or build/bin)
# Uses hyperfine when installed (-N: no shell in between), else a plain timing loop.
set -euo pipefail

here=$(cd "$(dirname "$0")/.." && pwd)
launcher=${1:-${DDP_BIN_DIR:-$here/build/bin}/ddp-launch}
NS=${NS:-"2 8 32"}
RUNS=${RUNS:-40}
WARMUP=${WARMUP:-5}
[ -x "$launcher" ] || { echo "launch.sh: no ddp-launch at $launcher (build it first)" >&2; exit 2; }
have_mpirun=1
command -v mpirun >/dev/null || { have_mpirun=0; echo "launch.sh: mpirun not found: ddp-launch only" >&2; }
mpi_flags="--oversubscribe"
[ "$(id -u)" = 0 ] && mpi_flags="--allow-run-as-root $mpi_flags"

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# median_ms CMD...: runs CMD WARMUP+RUNS times, prints the median wall time in ms.
median_ms() {
  if command -v hyperfine >/dev/null; then
    hyperfine -N --style none --warmup "$WARMUP" --runs "$RUNS" --export-json "$tmp/h.json" "$*" >/dev/null
    python3 -c 'import json,sys; print("%.2f" % (json.load(open(sys.argv[1]))["results"][0]["median"]*1e3))' "$tmp/h.json"
  else
    for _ in $(seq "$WARMUP"); do "$@" >/dev/null; done
    for _ in $(seq "$RUNS"); do
      s=$(date +%s%N); "$@" >/dev/null; e=$(date +%s%N); echo $(( (e - s) / 1000 ))
    done | sort -n | awk '{a[NR]=$1} END {m=(NR%2)?a[(NR+1)/2]:(a[NR/2]+a[NR/2+1])/2; printf "%.2f\n", m/1000}'
  fi
}

echo "ddp-launch: $launcher"
echo "machine: $(nproc) CPUs, $(uname -r); runs per point: $RUNS (median)"
printf "%4s  %16s  %16s  %8s\n" N "ddp-launch (ms)" "mpirun (ms)" ratio
for n in $NS; do
  # Back to back per N, so drift on a noisy machine hits both alike.
  ours=$(median_ms "$launcher" --standalone --nproc-per-node "$n" /bin/true)
  if [ "$have_mpirun" = 1 ]; then
    # shellcheck disable=SC2086
    theirs=$(median_ms mpirun -np "$n" $mpi_flags /bin/true)
    ratio=$(python3 -c "print('%.3f' % ($ours / $theirs))")
  else
    theirs="-"; ratio="-"
  fi
  printf "%4s  %16s  %16s  %8s\n" "$n" "$ours" "$theirs" "$ratio"
done
