#!/usr/bin/env bash
# Recovery in place across emulated hosts (tests/netns/hosts.sh, elastic_harness.sh). 2 hosts run
# ddp-launch --nnodes 1:2 over a tcp rendezvous hosted on host 1 (heartbeats 0.2 s x 5), each one
# worker, ddp_elastic_probe (ddp/elastic.h: a counter all_reduced every step, committed). Once
# both workers are in a group of 2, host 2's launcher is SIGKILLed (its worker dies with it).
# Host 1's worker must go on in place: the same PID in a group of 1 of a later round, and finish
# (exit 0); the log names host 2 as lost; no worker or /dev/shm entry is left. A few seconds.
# Exit 77 (Skipped) when not root or a tool is missing.
# usage: hosts_in_place_test.sh <bin dir> <tests bin dir> <source dir>
set -uo pipefail
bin=$1 tbin=$2 src=$3
. "$src/tests/netns/elastic_harness.sh"
harness_up inplace 2

for h in $(seq 1 $n); do launch "$h" --nnodes 1:2 "$tbin/ddp_elastic_probe" 150 20; done
twos() { cat "$out"/host*.log 2> /dev/null | grep -c 'group pid=.* world=2'; }
wait_until 15 "no group of 2" '[ "$(twos)" = 2 ]'
before=$(grep -o 'group pid=[0-9]* .*world=2' "$out/host1.log" | head -1 | sed 's/group pid=\([0-9]*\).*/\1/')
kill -KILL "${pids[1]}"
start=$(date +%s%N)
wait "${pids[0]}"; rc1=$?
ms=$((($(date +%s%N) - start) / 1000000))
[ $rc1 = 0 ] || fail "host 1 exited $rc1"
grep -q "${p}h2) lost: no heartbeat" "$out/host1.log" || fail "host 1 did not name host 2 as lost"
grep -q "with the workers in place" "$out/host1.log" || fail "host 1 did not keep its workers"
after=$(grep -o "group pid=[0-9]* round=[0-9]* rank=0 world=1" "$out/host1.log" | tail -1)
[ -n "$after" ] || fail "host 1's worker formed no group of 1"
[ "$(echo "$after" | sed 's/group pid=\([0-9]*\).*/\1/')" = "$before" ] || fail "host 1's worker was restarted: $before, then $after"
grep -q "done pid=$before .*steps=150" "$out/host1.log" || fail "host 1's worker did not finish its 150 steps"
[ "$(grep -c 'restarting the workers' "$out/host1.log")" = 0 ] || fail "host 1 restarted its workers"
assert_clean 1
echo "host 2 SIGKILLed: host 1's worker (pid $before) went on in place ($after) and finished in ${ms} ms: ok"
