#!/usr/bin/env bash
# The main job on localhost (`make demo`): the data-parallel MLP training example under the
# launcher, two workers. Loss falls epoch by epoch; the final weights' checksum is printed once
# every rank has checked it is identical everywhere.
set -euo pipefail
build=${1:-build}
for bin in ddp-launch ddp-train-mlp; do
  if [[ ! -x "$build/bin/$bin" ]]; then
    echo "demo: $build/bin/$bin is missing: build first (make build)" >&2
    exit 1
  fi
done
exec "$build/bin/ddp-launch" --standalone --nproc-per-node 2 "$build/bin/ddp-train-mlp" "${@:2}"
