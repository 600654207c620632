#!/usr/bin/env bash
# The restart path of an elastic job whose workers are libddp programs that do not recover in
# place (tests/netns/hosts.sh, elastic_harness.sh): 2 hosts run ddp-launch --nnodes 1:2
# --max-restarts 0, each one worker, ddp_elastic_probe --restart (init_process_group from the
# launcher's environment; a counter all_reduced every 10 ms). Once both are in a group of 2, host
# 2's launcher is SIGKILLed: host 1's worker fails, and host 1 starts a new one in a round of 1
# (a membership change: no restart counted). Host 2's launcher then starts again: both nodes
# start new workers in a round of 2, which must form their group (their store keys are the new
# round's, not those of round 0 under the same restart count), sum over 2 ranks at every step
# (value 2 x STEPS) and finish; both launchers exit 0, nothing left behind. About 10 s. Exit 77
# (Skipped) when not root or a tool is missing.
# usage: hosts_restart_test.sh <bin dir> <tests bin dir> <source dir>
set -uo pipefail
bin=$1 tbin=$2 src=$3
. "$src/tests/netns/elastic_harness.sh"
harness_up restart 2
steps=400
job=(--nnodes 1:2 --max-restarts 0 "$tbin/ddp_elastic_probe" $steps 10 --restart)

launch 1 "${job[@]}"
launch 2 "${job[@]}"
count() { cat "$out"/host*.log 2> /dev/null | grep -c "group pid=[0-9]* round=$1 rank=[0-9]* world=$2\$"; }
wait_until 15 "no group of 2 in round 0" '[ "$(count 0 2)" = 2 ]'
kill -KILL "${pids[1]}"
wait_until 15 "no group of 1 in round 1 on host 1" '[ "$(count 1 1)" = 1 ]'
launch 2 "${job[@]}"
ended() { ! kill -0 "${pids[0]}" 2> /dev/null && ! kill -0 "${pids[2]}" 2> /dev/null; }
wait_until 30 "both launchers ending after round 2" ended
wait "${pids[0]}"; rc1=$?
wait "${pids[2]}"; rc2=$?
[ $rc1 = 0 ] || fail "host 1 exited $rc1"
[ $rc2 = 0 ] || fail "host 2 (started again) exited $rc2"
grep -q "${p}h2) lost: no heartbeat" "$out/host1.log" || fail "host 1 did not name host 2 as lost"
[ "$(count 2 2)" = 2 ] || fail "round 2 did not form a group of 2 ($(count 2 2) of 2 workers)"
done_lines=$(cat "$out"/host*.log | grep -c "done pid=[0-9]* value=$((2 * steps)) steps=$steps")
[ "$done_lines" = 2 ] || fail "$done_lines of round 2's 2 workers summed over 2 ranks at every step and finished"
! grep -q 'restarting the workers' "$out"/host*.log || fail "a membership change was counted as a restart"
assert_clean 1 2
echo "host 2 lost, then back: host 1 went on in a round of 1, then both in a round of 2 with new workers, finished: ok"
