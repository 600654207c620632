#!/usr/bin/env bash
# bench/hosts.sh end to end, small (root only; exit 77, Skipped, otherwise; a smoke test, not a
# timing test): 2 emulated hosts x 1 rank, two sizes. It must print the link floor, every
# host's ring figure and each size's floor (and from 1 MiB the adds per host), then rows for
# ours (automatic and flat) beside Gloo, and Open MPI's rows or the reason they are missing; and fail, showing the ranks' stderr, when
# a run fails. Each host runs on CPUs of its own (HOST_CPUS), or shares them when told; COMPARE=none
# measures ours alone.
# usage: hosts_test.sh <source dir> <bin dir>
set -uo pipefail
src=$1
bin=$2
[ "$(id -u)" = 0 ] || { echo "needs root"; exit 77; }
out=$(mktemp)
trap 'rm -f "$out"' EXIT
fail() { echo "FAIL: $*"; cat "$out"; exit 1; }
BIN=$bin HOSTS=2 RANKS_PER_HOST=1 bash "$src/bench/hosts.sh" --op all_reduce --sizes 4,64K --iters 2 --repeats 2 \
  --warmup 1 > "$out" 2>&1
rc=$?
[ $rc = 77 ] && { cat "$out"; exit 77; }
[ $rc = 0 ] || fail "exit $rc"
num='[0-9]+\.[0-9]+'
# Each host on CPUs of its own (HOST_CPUS=auto) where there are enough, else sharing them.
if [ "$(nproc)" -ge 2 ]; then
  grep -Eq "^# 2 hosts x 1 ranks; peers: gloo; each host on [0-9]+ CPUs of its own: [0-9,]+ [0-9,]+$" "$out" ||
    fail "no CPUs of their own for the hosts"
else
  grep -q "the hosts share this machine's" "$out" || fail "the hosts' CPUs not said"
fi
grep -Eq "^# link floor: one TCP connection host 1 -> host 2: $num GB/s$" "$out" || fail "no link floor"
grep -Eq "^# every host sending to the next at once: host 1 -> 2 $num GB/s, host 2 -> 1 $num GB/s \(mean $num GB/s\)$" \
  "$out" || fail "no ring figures"
floor="[0-9]+(\.[0-9]+)?"  # 100 us and more: no decimals
grep -Eq "^# all_reduce floor .*: 4 $floor us, 64K $floor us$" "$out" || fail "no per-size floors"
# The adds per host are timed from 1 MiB only (below, the pass times its threads' start).
grep -q "^# adds per host" "$out" && fail "adds printed for sizes under 1 MiB"
for mode in auto socket; do
  rows=$(sed -n "/^## ours: DDP_TCP_TRANSPORT=$mode\$/,/^##/p" "$out")
  for impl in tcp gloo-direct; do
    for bytes in 4 65536; do
      grep -Eq "^all_reduce +$impl +cpu +2 +$bytes " <<< "$rows" || fail "$mode: no $impl row at $bytes bytes"
    done
  done
done
if grep -q "^## Open MPI (mpirun across the hosts" "$out"; then
  grep -Eq "^all_reduce +mpi-direct +cpu +2 +65536 " "$out" || grep -q "^# Open MPI did not" "$out" ||
    fail "Open MPI: neither rows nor a reason"
else
  grep -q "^## Open MPI: no mpirun here, skipped" "$out" || fail "Open MPI: not run and not said"
fi
# A run that fails says why: a --compare peer that cannot run there (Open MPI without mpirun).
BIN=$bin HOSTS=2 RANKS_PER_HOST=1 MODES=auto COMPARE=mpi bash "$src/bench/hosts.sh" --sizes 4 --iters 1 --repeats 1 \
  --warmup 0 > "$out" 2>&1 && fail "COMPARE=mpi under ddp-launch succeeded"
grep -q "mpi-direct sees rank 0 of 1" "$out" || fail "the failed run's stderr is not shown"
# HOST_CPUS: none shares every CPU; more than there are, or not a count, is refused by name.
# COMPARE=none: ours alone, no peer's rows.
BIN=$bin HOSTS=2 RANKS_PER_HOST=1 MODES=auto HOST_CPUS=none COMPARE=none bash "$src/bench/hosts.sh" --sizes 4 \
  --iters 1 --repeats 1 --warmup 0 > "$out" 2>&1 || fail "HOST_CPUS=none COMPARE=none failed"
grep -q "^# 2 hosts x 1 ranks; peers: none; the hosts share this machine's" "$out" || fail "HOST_CPUS=none not said"
grep -Eq "^all_reduce +tcp +cpu +2 +4 " "$out" || fail "COMPARE=none: no row of ours"
grep -q "gloo-direct" "$out" && fail "COMPARE=none: a peer was measured"
# From 1 MiB, the adds per host: 2 x 1 ranks make 1 add per element, half of it on each host.
BIN=$bin HOSTS=2 RANKS_PER_HOST=1 MODES=auto COMPARE=none bash "$src/bench/hosts.sh" --sizes 4,1048576 --iters 1 \
  --repeats 1 --warmup 0 > "$out" 2>&1 || fail "--sizes 4,1048576 failed"
grep -Eq "^# adds per host \(\(W - 1\) / N = 1 / 2 passes of a \+= b .*\): 1M $floor us$" "$out" || fail "no adds per host"
for bad in 4096 two; do
  BIN=$bin HOSTS=2 HOST_CPUS=$bad bash "$src/bench/hosts.sh" --sizes 4 > "$out" 2>&1 && fail "HOST_CPUS=$bad accepted"
  grep -q "HOST_CPUS" "$out" || fail "HOST_CPUS=$bad refused without naming it"
done
echo "hosts_test: ok"
