#!/usr/bin/env bash
# The demo job end to end, as `make demo` runs it: ddp-train-mlp under ddp-launch, two workers.
# Promises checked: exit 0; one progress line per epoch; the loss falls from the first epoch to
# the last; test accuracy well above chance (8 classes: 12.5%); the final weights are identical
# on every rank (the job all-gathers their checksums and says so).
# The mpi backend runs under Open MPI's own launcher instead (the job reads OMPI_COMM_WORLD_*).
# Usage: train_mlp_test.sh BIN_DIR BACKEND [MPIRUN]
set -euo pipefail
bin=$1 backend=$2
job=("$bin/ddp-train-mlp" --backend "$backend" --epochs 4 --samples 8192)
if [[ $backend == mpi ]]; then
  launch=("${3:-mpirun}" -np 2 --allow-run-as-root --oversubscribe --bind-to none --mca mpi_yield_when_idle 1)
else
  launch=("$bin/ddp-launch" --standalone --nproc-per-node 2)
fi
out=$("${launch[@]}" "${job[@]}" 2>&1) || { echo "$out"; echo "FAIL: the job exited non-zero"; exit 1; }
echo "$out"
fail() { echo "FAIL: $*"; exit 1; }
[[ $(grep -c '^epoch ' <<<"$out") == 4 ]] || fail "expected 4 epoch lines"
first=$(grep '^epoch  1/4' <<<"$out" | awk '{print $4}')
last=$(grep '^epoch  4/4' <<<"$out" | awk '{print $4}')
awk -v a="$first" -v b="$last" 'BEGIN { exit !(b < 0.8 * a) }' || fail "loss did not fall: $first -> $last"
acc=$(grep '^epoch  4/4' <<<"$out" | sed -E 's/.*test-acc +([0-9.]+)%.*/\1/')
awk -v a="$acc" 'BEGIN { exit !(a > 40) }' || fail "test accuracy $acc% is near chance"
grep -q 'identical on all 2 ranks' <<<"$out" || fail "no checksum agreement line"
echo "ok: loss $first -> $last, test accuracy $acc%"
