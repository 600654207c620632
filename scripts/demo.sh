#!/usr/bin/env bash
# The main job on localhost (`make demo`): a CNN trained data-parallel on Fashion-MNIST with
# LibTorch and ddp::torch::DistributedDataParallel, two workers under the launcher. One line per
# epoch: training loss, test accuracy (>= 85% after the 2 epochs), samples/s over both ranks.
# Extra arguments go to the job: scripts/demo.sh build --epochs 3 --bucket-view
set -euo pipefail
build=${1:-build}
for bin in ddp-launch ddp-train-fashion-mnist; do
  if [[ ! -x "$build/bin/$bin" ]]; then
    echo "demo: $build/bin/$bin is missing: build first (make build; LibTorch comes from libtorch-dev)" >&2
    exit 1
  fi
done
exec "$build/bin/ddp-launch" --standalone --nproc-per-node 2 "$build/bin/ddp-train-fashion-mnist" "${@:2}"
