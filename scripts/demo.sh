#!/usr/bin/env bash
# The main job on localhost: a real 2-worker job through ddp-launch. Until the training example
# lands it is the collective benchmark (ddp-bench collective, all_reduce, checked results) on the
# first backend that is built (tcp, then gloo); without ddp-bench, ddp_store_probe (every worker
# meets the others in the launcher's store with the job token).
set -euo pipefail
build=${1:-build}
launch="$build/bin/ddp-launch"
bench="$build/bin/ddp-bench"

if "$bench" collective --help > /dev/null 2>&1; then
  for backend in tcp gloo; do
    echo "demo: ddp-launch --standalone --nproc-per-node 2 ddp-bench collective --backend $backend" >&2
    if "$launch" --standalone --nproc-per-node 2 "$bench" collective --op all_reduce --backend "$backend" \
        --sizes 4,1K,64K,1M,16M --iters 20; then
      exit 0
    fi
    echo "demo: the $backend run failed (see above); trying the next backend" >&2
  done
  exit 1
fi
echo "demo: ddp-launch --standalone --nproc-per-node 2 ddp_store_probe" >&2
exec "$launch" --standalone --nproc-per-node 2 "$build/tests/ddp_store_probe"
