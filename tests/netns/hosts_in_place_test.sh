#!/usr/bin/env bash
# Recovery in place across emulated hosts (tests/netns/hosts.sh, elastic_harness.sh). 2 hosts run
# ddp-launch --nnodes 1:2 over a tcp rendezvous hosted on host 1 (heartbeats 0.2 s x 5), each one
# worker, ddp_elastic_probe --print-steps (ddp/elastic/elastic.h: a counter all_reduced every step,
# committed). Once both workers took a step in a group of 2 (past the group's state sync, so the
# loss lands in a step), host 2's launcher is SIGKILLed (its worker dies with it), and host 1's
# log must name host 2 as lost. Then, without MAX_RESTARTS: host 1's worker must go on in place,
# the same PID in a group of 1 of a later round, and finish (exit 0) with the value its steps
# imply (elastic_harness.sh, assert_done_implied: 2 per step taken at world 2, 1 per step at
# world 1, a rolled-back step counted as retaken): the state survived the move, neither lost nor
# counted twice.
# With MAX_RESTARTS (0 or 1), the fallback: the probe runs --stall-on-change (in the first
# attempt, a worker whose step fails in a group of 2 waits, stuck, instead of re-joining), with
# join_timeout 2 s and --max-restarts MAX_RESTARTS. Host 1's launcher moves its worker in place;
# the worker does not re-join within join_timeout, so the launcher announces a failure naming
# that (counted against --max-restarts). With 1: the worker is restarted ("restarting the workers
# (1 of 1)", a new PID) and finishes; host 1 exits 0. With 0: host 1 exits 122 saying why and
# that no restart was left. A worker that finishes must hold the value its steps imply (a
# restarted one starts from step 1: it has no peer to sync from).
# With MODE exit: the probe runs --exit-on-change under --max-restarts 0: host 1's worker exits 3
# on its peer's loss (connection closed) instead of re-joining. A failure caused by the lost node
# is not counted: host 1 must start a new worker (a new PID) in the smaller round, though no
# restart is left, and finish (exit 0) with the value its steps imply (from step 1, as above).
# Every case: no worker or /dev/shm entry left. A few seconds. Exit 77 (Skipped) when not root or
# a tool is missing.
# usage: hosts_in_place_test.sh <bin dir> <tests bin dir> <source dir> [MAX_RESTARTS | exit]
set -uo pipefail
bin=$1 tbin=$2 src=$3 restarts=${4:-}
. "$src/tests/netns/elastic_harness.sh"
harness_up inplace 2

steps=150 args=() probe=(--print-steps)
if [ "$restarts" = exit ]; then
  steps=100 args=(--max-restarts 0) probe+=(--exit-on-change)
elif [ -n "$restarts" ]; then
  steps=100 args=(--max-restarts "$restarts") probe+=(--stall-on-change) conf=$conf,join_timeout=2
fi
for h in $(seq 1 $n); do
  launch "$h" --nnodes 1:2 "${args[@]}" "$tbin/ddp_elastic_probe" $steps 20 "${probe[@]}"
done
stepped() { grep -q '^elastic_job step .* world 2 ' "$out/host1.log" "$out/host2.log" 2> /dev/null; }
wait_until 15 "no step at world 2 on both hosts" 'stepped'
before=$(grep -o 'group pid=[0-9]* .*world=2' "$out/host1.log" | head -1 | sed 's/group pid=\([0-9]*\).*/\1/')
kill -KILL "${pids[1]}"
start=$(date +%s%N)
wait "${pids[0]}"; rc1=$?
ms=$((($(date +%s%N) - start) / 1000000))
log=$out/host1.log
grep -q "${p}h2) lost: no heartbeat" "$log" || fail "host 1 did not name host 2 as lost"
if [ "$restarts" != exit ]; then
  grep -q "with the workers in place" "$log" || fail "host 1 did not keep its workers"
fi
why="node [0-9]* (${p}h1): the worker(s) moved in place did not re-join round [0-9]* within 2000 ms (join_timeout)"
if [ -z "$restarts" ]; then
  [ $rc1 = 0 ] || fail "host 1 exited $rc1"
  after=$(grep -o "group pid=[0-9]* round=[0-9]* rank=0 world=1" "$log" | tail -1)
  [ -n "$after" ] || fail "host 1's worker formed no group of 1"
  [ "$(echo "$after" | sed 's/group pid=\([0-9]*\).*/\1/')" = "$before" ] || fail "host 1's worker was restarted: $before, then $after"
  grep -q "done pid=$before .*steps=150" "$log" || fail "host 1's worker did not finish its 150 steps"
  ! grep -q 'restarting the workers' "$log" || fail "host 1 restarted its workers"
  assert_done_implied 150 1
  result="went on in place ($after) and finished with value $implied, what its steps imply"
elif [ "$restarts" = exit ]; then
  grep -q "exited pid=$before: .* was lost: " "$log" || fail "host 1's worker $before did not exit on its peer's loss"
  [ $rc1 = 0 ] || fail "host 1 exited $rc1"
  # The worker may see its peer gone before the launcher does, or after it began to move it in place.
  grep -Eq "membership changed \(.*${p}h2\) lost: .*\); joining round 1( with the workers in place)?\$" "$log" ||
    fail "host 1 did not take its worker's exit for the membership change: $(grep 'ddp-launch: ' "$log")"
  ! grep -q "restarting the workers" "$log" || fail "host 1 counted its worker's exit as a failure"
  after=$(grep -o 'done pid=[0-9]* .*steps=100' "$log" | sed 's/done pid=\([0-9]*\).*/\1/')
  [ -n "$after" ] || fail "no worker finished its 100 steps"
  [ "$after" != "$before" ] || fail "the worker that finished is the one that exited ($before)"
  grep -q "group pid=$after round=1 rank=0 world=1" "$log" || fail "the new worker $after was not in round 1's group of 1"
  assert_done_implied 100 1
  result="exited on its peer's loss; a new worker ($after) went on in round 1, no restart counted (--max-restarts 0)"
elif [ "$restarts" = 1 ]; then
  grep -q "stalled pid=$before:" "$log" || fail "host 1's worker $before did not stall"
  [ $rc1 = 0 ] || fail "host 1 exited $rc1"
  grep -q "restarting the workers (1 of 1) after: failed: $why" "$log" || fail "host 1 did not restart its worker, naming why"
  after=$(grep -o 'done pid=[0-9]* .*steps=100' "$log" | sed 's/done pid=\([0-9]*\).*/\1/')
  [ -n "$after" ] || fail "no worker finished its 100 steps"
  [ "$after" != "$before" ] || fail "the worker that finished is the one that stalled ($before)"
  assert_done_implied 100 1
  result="stalled, was not re-joined within join_timeout, restarted as pid $after and finished"
else
  grep -q "stalled pid=$before:" "$log" || fail "host 1's worker $before did not stall"
  [ $rc1 = 122 ] || fail "host 1 exited $rc1, not 122"
  grep -q "the job stopped: $why; no restart left (--max-restarts 0)" "$log" || fail "host 1 did not say why it stopped"
  ! grep -q "restarting the workers" "$log" || fail "host 1 restarted its workers with --max-restarts 0"
  result="stalled, was not re-joined within join_timeout; host 1 exited 122 naming why"
fi
assert_clean 1
echo "host 2 SIGKILLed: host 1's worker (pid $before) $result, ${ms} ms: ok"
