#!/usr/bin/env bash
# Runs each libFuzzer target for SECONDS over its seed corpus: scripts/fuzz.sh BUILD_DIR SECONDS
# TARGET... (FUZZ_JOBS at a time, default one per core). New inputs go to BUILD_DIR/corpus/<target> (the seeds in tests/fuzz/corpus stay as
# they are); a crash, a leak, undefined behaviour, a hang (-timeout) or an allocation past
# -rss_limit_mb stops the run with the reproducer in BUILD_DIR/crashes/ and a non-zero exit.
set -euo pipefail
build=$1
seconds=$2
shift 2
cd "$(dirname "$0")/.."
mkdir -p "$build/crashes" "$build/tmp"
export TMPDIR; TMPDIR="$(cd "$build/tmp" && pwd)"  # the targets' scratch files (error_file writes one) stay here
# One target: prints its verdict, returns non-zero on a finding.
run_target() {
  local target=$1 bin="$build/fuzz/${1}_fuzz" seeds="tests/fuzz/corpus/$1" work="$build/corpus/$1"
  local start runs
  mkdir -p "$work"
  start=$(date +%s)
  if "$bin" "$work" "$seeds" -max_total_time="$seconds" -timeout=20 -rss_limit_mb=2048 -max_len=65536 \
       -artifact_prefix="$build/crashes/$target-" -print_final_stats=1 > "$build/$target.fuzz.log" 2>&1; then
    runs=$(grep -Eo 'stat::number_of_executed_units: *[0-9]+' "$build/$target.fuzz.log" | grep -Eo '[0-9]+$' || echo "?")
    echo "fuzz: $target clean for $(( $(date +%s) - start )) s ($runs runs)"
  else
    echo "fuzz: $target FAILED after $(( $(date +%s) - start )) s; reproducer in $build/crashes/:"
    tail -40 "$build/$target.fuzz.log"
    return 1
  fi
}
# Targets run FUZZ_JOBS at a time (default: one per core; each target is one process on one
# core, so each still gets its SECONDS of a whole core).
jobs=${FUZZ_JOBS:-$(nproc)}
status=0
running=0
for target in "$@"; do
  if [ "$running" -ge "$jobs" ]; then
    wait -n || status=1
    running=$((running - 1))
  fi
  run_target "$target" &
  running=$((running + 1))
done
while [ "$running" -gt 0 ]; do
  wait -n || status=1
  running=$((running - 1))
done
exit $status
