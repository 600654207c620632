#!/usr/bin/env bash
# A second node lost while the survivors sync state (tests/netns/hosts.sh, elastic_harness.sh):
# 3 hosts run ddp-launch --nnodes 1:3 over the tcp rendezvous hosted on host 1, heartbeats
# 0.5 s x 6 (a 3 s bound: a loaded 2-core machine can keep a store's answer from a launcher for
# more than 1 s), each one worker, ddp_elastic_probe --print-steps --slow-on-group 2000 (a
# counter all_reduced every 20 ms, committed; a re-formed group waits 2 s in on_group before its
# state sync: the window). Once all three took 20 steps at world 3, host 3's launcher is
# SIGKILLed (its worker dies with it); as soon as the survivors' group of 2 is formed (its
# on_group line on both), host 2's launcher is SIGKILLed too. Host 1's worker, whose sync in the
# group of 2 then fails, must go on in place (same PID) in a group of 1 of a later round, having
# taken no step at world 2 (so the second loss did land before the sync), and finish with the
# value its steps imply (elastic_harness.sh, assert_done_implied: 3 per step at world 3, 1 per
# step at world 1, a rolled-back step counted as retaken). Host 1's launcher names both lost,
# exits 0, and no worker or /dev/shm entry is left. About 20 s. Exit 77 (Skipped) when not root
# or a tool is missing.
# usage: hosts_in_place_second_loss_test.sh <bin dir> <tests bin dir> <source dir>
set -uo pipefail
bin=$1 tbin=$2 src=$3
. "$src/tests/netns/elastic_harness.sh"
harness_up secondloss 3
conf=keep_alive_interval=0.5,keep_alive_max_attempt=6,last_call_timeout=0.5
steps=300

for h in 1 2 3; do
  launch "$h" --nnodes 1:3 "$tbin/ddp_elastic_probe" $steps 20 --print-steps --slow-on-group 2000
done
# At least 20 steps at world 3 on every host.
at3() {
  local h
  for h in 1 2 3; do
    [ "$(grep -c '^elastic_job step .* world 3 ' "$out/host$h.log" 2> /dev/null)" -ge 20 ] || return 1
  done
}
wait_until 20 "20 steps at world 3 on every host" at3
worker1=$(grep -o '^group pid=[0-9]*' "$out/host1.log" | head -1 | cut -d= -f2)
kill -KILL "${pids[2]}"
wait "${pids[2]}" 2> /dev/null
twos() { grep -q '^group pid=.* world=2$' "$out/host1.log" && grep -q '^group pid=.* world=2$' "$out/host2.log"; }
wait_until 15 "the survivors' group of 2" twos
kill -KILL "${pids[1]}"
wait "${pids[1]}" 2> /dev/null
wait "${pids[0]}"
rc=$?
log=$out/host1.log
[ $rc = 0 ] || fail "host 1 exited $rc"
grep -q "(${p}h3) lost: no heartbeat" "$log" || fail "host 1 did not name host 3 lost"
grep -q "(${p}h2) lost: no heartbeat" "$log" || fail "host 1 did not name host 2 lost"
grep -q "^group pid=$worker1 round=[1-9][0-9]* rank=[01] world=2\$" "$log" ||
  fail "host 1's worker $worker1 formed no group of 2 with host 2"
! grep -q '^elastic_job step .* world 2 ' "$log" ||
  fail "host 1's worker stepped at world 2: host 2 was lost after the sync, not during it"
grep -q "^group pid=$worker1 round=[1-9][0-9]* rank=0 world=1\$" "$log" ||
  fail "host 1's worker $worker1 formed no group of 1 (restarted?)"
grep -q "^done pid=$worker1 " "$log" || fail "host 1's worker $worker1 did not finish (restarted?)"
! grep -q 'restarting the workers' "$log" || fail "host 1 restarted its workers"
assert_done_implied $steps 1
assert_clean 1
echo "host 3 lost, then host 2 while the survivors synced: host 1's worker ($worker1) went on in place" \
  "and finished with value $implied, what its steps imply: ok"
