#!/usr/bin/env bash
# bench/gpu.sh: on a machine with an NVIDIA GPU, build, run the `gpu` tests, then the NCCL and
# CUDA-staging benchmarks. Prints everything; exits non-zero if the build or a test fails.
#
#   bench/gpu.sh [build-dir]        (default: build; uses the release preset)
#
# Environment: SIZES (default 1K,64K,1M,16M,256M), ITERS (default 20), JOBS (default nproc).
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
build="${1:-build}"
sizes="${SIZES:-1K,64K,1M,16M,256M}"
iters="${ITERS:-20}"
jobs="${JOBS:-$(nproc)}"
cd "$root"

echo "== devices"
if ! command -v nvidia-smi >/dev/null || ! nvidia-smi -L; then
  echo "bench/gpu.sh: no GPU visible (nvidia-smi); nothing to measure" >&2
  exit 2
fi
gpus="$(nvidia-smi -L | grep -c '^GPU')"

echo "== build ($build)"
cmake --preset release -B "$build" -DDDP_WERROR=ON >/dev/null
grep -q "DDP_WITH_NCCL:BOOL=ON" "$build/CMakeCache.txt" || {
  echo "bench/gpu.sh: CMake did not find CUDA + NCCL: the nccl backend is not built" >&2
  exit 1
}
cmake --build "$build" -j"$jobs"

echo "== gpu tests"
ctest --test-dir "$build" -L gpu --output-on-failure

bench="$build/bin/ddp-bench"
echo "== benchmarks (medians; busbw as nccl-tests defines it)"
if ! "$bench" collective --help 2>&1 | grep -q -- "--device"; then
  # ddp-bench collective measures host buffers; device buffers need its --device flag.
  echo "bench/gpu.sh: this ddp-bench has no --device flag; NCCL and staging benchmarks skipped" >&2
  exit 0
fi
for op in all_reduce all_gather reduce_scatter broadcast; do
  # NCCL: one rank per GPU (two ranks cannot share one GPU under NCCL).
  if [ "$gpus" -ge 2 ]; then
    "$bench" collective --backend nccl --device cuda -n "$gpus" --op "$op" --sizes "$sizes" --iters "$iters" --format table
  else
    "$bench" collective --backend nccl --device cuda -n 1 --op "$op" --sizes "$sizes" --iters "$iters" --format table
  fi
  # CUDA staging: tcp with device buffers, two ranks sharing GPU 0, side by side with host tcp.
  "$bench" collective --backend tcp --device cuda -n 2 --op "$op" --sizes "$sizes" --iters "$iters" --format table
  "$bench" collective --backend tcp -n 2 --op "$op" --sizes "$sizes" --iters "$iters" --format table
done
