#!/usr/bin/env bash
# bench/gpu.sh: on a machine with an NVIDIA GPU, build, run the `gpu` tests, then the NCCL and
# CUDA-staging benchmarks (ddp-bench collective --device cuda). Prints everything; exits
# non-zero, saying why, when there is no GPU, when CUDA/NCCL were not found, or when the build,
# a test or a benchmark (a wrong result included) fails.
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
echo "== benchmarks (device buffers; max over ranks of per-op time, medians; busbw as nccl-tests defines it)"
if ! "$bench" collective --help 2>&1 | grep -q -- "--device"; then
  echo "bench/gpu.sh: $bench has no --device flag: cannot measure device buffers" >&2
  exit 1
fi
# NCCL: one rank per GPU (NCCL refuses two ranks on one GPU); with one GPU that is world size 1.
nccl_world=$gpus
if [ "$gpus" -lt 2 ]; then
  echo "bench/gpu.sh: one GPU: the NCCL rows are world size 1 (no inter-GPU traffic)" >&2
fi
for op in all_reduce all_gather reduce_scatter broadcast; do
  "$bench" collective --backend nccl --device cuda -n "$nccl_world" --op "$op" --sizes "$sizes" --iters "$iters" --format table
  # CUDA staging: tcp with device buffers, two ranks sharing GPU 0, side by side with host tcp.
  "$bench" collective --backend tcp --device cuda -n 2 --op "$op" --sizes "$sizes" --iters "$iters" --format table
  "$bench" collective --backend tcp --device cpu -n 2 --op "$op" --sizes "$sizes" --iters "$iters" --format table
done
