#!/usr/bin/env bash
# Runs each libFuzzer target for SECONDS over its seed corpus: scripts/fuzz.sh BUILD_DIR SECONDS
# TARGET... New inputs go to BUILD_DIR/corpus/<target> (the seeds in tests/fuzz/corpus stay as
# they are); a crash, a leak, undefined behaviour, a hang (-timeout) or an allocation past
# -rss_limit_mb stops the run with the reproducer in BUILD_DIR/crashes/ and a non-zero exit.
set -euo pipefail
build=$1
seconds=$2
shift 2
cd "$(dirname "$0")/.."
mkdir -p "$build/crashes" "$build/tmp"
export TMPDIR; TMPDIR="$(cd "$build/tmp" && pwd)"  # the targets' scratch files (error_file writes one) stay here
status=0
for target in "$@"; do
  bin="$build/fuzz/${target}_fuzz"
  seeds="tests/fuzz/corpus/$target"
  work="$build/corpus/$target"
  mkdir -p "$work"
  start=$(date +%s)
  if "$bin" "$work" "$seeds" -max_total_time="$seconds" -timeout=20 -rss_limit_mb=2048 -max_len=65536 \
       -artifact_prefix="$build/crashes/$target-" -print_final_stats=1 > "$build/$target.fuzz.log" 2>&1; then
    runs=$(grep -Eo 'stat::number_of_executed_units: *[0-9]+' "$build/$target.fuzz.log" | grep -Eo '[0-9]+$' || echo "?")
    echo "fuzz: $target clean for $(( $(date +%s) - start )) s ($runs runs)"
  else
    echo "fuzz: $target FAILED after $(( $(date +%s) - start )) s; reproducer in $build/crashes/:"
    tail -40 "$build/$target.fuzz.log"
    status=1
  fi
done
exit $status
