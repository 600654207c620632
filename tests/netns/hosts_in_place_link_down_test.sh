#!/usr/bin/env bash
# Recovery in place when a host is cut off without a reset (tests/netns/hosts.sh,
# elastic_harness.sh): 2 hosts run ddp-launch --nnodes 1:2 (heartbeats 0.2 s x 5), each one
# worker, ddp_elastic_probe (a counter all_reduced every 20 ms, committed), DDP_TIMEOUT_MS=600000.
# Once both workers are in a group of 2, host 2's link is taken down (no FIN, no RST): host 1's
# worker then waits in an all_reduce that only the launchers' announcement can end, since its
# sockets would notice the loss only at the link-loss bound (keepalive and TCP_USER_TIMEOUT, about
# 8 s) and its timeout is 10 minutes. Host 1's worker must be released by the abort (its log shows
# the Aborted op with the announcement's reason, and no lost-peer error), go on in place (same
# PID, a group of 1 of a later round) and finish. A few seconds. Exit 77 (Skipped) when not root
# or a tool is missing.
# usage: hosts_in_place_link_down_test.sh <bin dir> <tests bin dir> <source dir>
set -uo pipefail
bin=$1 tbin=$2 src=$3
. "$src/tests/netns/elastic_harness.sh"
harness_up linkdown 2
export DDP_TIMEOUT_MS=600000

for h in $(seq 1 $n); do
  launch "$h" --nnodes 1:2 "$tbin/ddp_elastic_probe" 150 20
done
twos() { cat "$out"/host*.log 2> /dev/null | grep -c 'group pid=.* world=2'; }
wait_until 15 "no group of 2" '[ "$(twos)" = 2 ]'
before=$(grep -o 'group pid=[0-9]* .*world=2' "$out/host1.log" | head -1 | sed 's/group pid=\([0-9]*\).*/\1/')
$hosts link "$p" 2 down || fail "could not take host 2's link down"
start=$(date +%s%N)
wait "${pids[0]}"; rc1=$?
ms=$((($(date +%s%N) - start) / 1000000))
log=$out/host1.log
[ $rc1 = 0 ] || fail "host 1 exited $rc1"
grep -q "${p}h2) lost: no heartbeat" "$log" || fail "host 1 did not name host 2 as lost"
grep -q "with the workers in place" "$log" || fail "host 1 did not keep its workers"
grep -q "aborted: round [0-9]* ended: changed: .*${p}h2) lost" "$log" ||
  fail "host 1's worker was not released by the abort (no Aborted op naming the announcement)"
! grep -q " was lost: " "$log" || fail "host 1's worker saw the link's loss before the announcement"
after=$(grep -o "group pid=[0-9]* round=[0-9]* rank=0 world=1" "$log" | tail -1)
[ -n "$after" ] || fail "host 1's worker formed no group of 1"
[ "$(echo "$after" | sed 's/group pid=\([0-9]*\).*/\1/')" = "$before" ] || fail "host 1's worker was restarted: $before, then $after"
grep -q "done pid=$before .*steps=150" "$log" || fail "host 1's worker did not finish its 150 steps"
! grep -q 'restarting the workers' "$log" || fail "host 1 restarted its workers"
# (Not assert_clean: host 2's launcher and worker, cut off, are still alive; the trap kills them.)
! kill -0 "$before" 2> /dev/null || fail "host 1's worker $before is still alive"
echo "host 2's link down: host 1's worker (pid $before) was aborted out of its all_reduce by the announcement, went on in place ($after) and finished, ${ms} ms: ok"
