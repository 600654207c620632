#!/usr/bin/env bash
# The demo CNN recovering in place across emulated hosts (tests/netns/hosts.sh,
# elastic_harness.sh): 3 hosts run ddp-launch --nnodes 2:3 (tcp rendezvous on host 1, heartbeats
# 0.5 s x 10: CI runs it beside the asan suite), one worker each, ddp-train-fashion-mnist
# --elastic-in-place for 2 epochs on the whole data set. Once rank 0 wrote its step-50 checkpoint
# (mid epoch 1), host 3's launcher is SIGKILLed: hosts 1 and 2 must go on in place, the same
# worker PIDs in a group of 2, naming host 3 as lost. Once they wrote the step-100 checkpoint,
# host 3's launcher starts again and joins: hosts 1 and 2 move in place once more, to a group of
# 3 with host 3's fresh worker, which takes their state by broadcast (every rank of that round
# starts from the same step, past 100, and the same parameter sum). All three finish (exit 0) on
# 3 ranks with a test accuracy >= 85%, no worker restarted, no worker or /dev/shm entry left.
# Minutes: label "cluster". Exit 77 (Skipped) when not root, a tool or the data set is missing.
# usage: hosts_in_place_cnn_test.sh <bin dir> <source dir>
set -uo pipefail
bin=$1 src=$2
[ -d /usr/share/datasets/fashion-mnist ] || { echo "no Fashion-MNIST data set"; exit 77; }
. "$src/tests/netns/elastic_harness.sh"
harness_up inplacecnn 3
conf=keep_alive_interval=0.5,keep_alive_max_attempt=10,last_call_timeout=1

demo() {
  launch "$1" --nnodes 2:3 "$bin/ddp-train-fashion-mnist" --elastic-in-place --threads 1 --epochs 2 \
    --checkpoint "$out/ckpt" --checkpoint-every 50
}
# in_group PID N H: worker PID formed a group of N on host H (as many times as asked: $4, else 1).
in_group() { [ "$(grep -c "in place: pid $1 round [0-9]* rank [0-9] of $2\$" "$out/host$3.log")" -ge "${4:-1}" ]; }
pid_of() { grep -o 'in place: pid [0-9]*' "$out/host$1.log" | head -1 | awk '{print $4}'; }

start=$(date +%s)
for h in $(seq 1 $n); do demo "$h"; done
wait_until 120 "no step-50 checkpoint" '[ -e "$out/ckpt/step-000000000050.ckpt" ]'
before1=$(pid_of 1) before2=$(pid_of 2) before3=$(pid_of 3)
in_group "$before1" 3 1 && in_group "$before2" 3 2 && in_group "$before3" 3 3 || fail "no group of 3"
kill -KILL "${pids[2]}"
wait_until 60 "hosts 1 and 2 in no group of 2" 'in_group "$before1" 2 1 && in_group "$before2" 2 2'
wait_until 60 "no step-100 checkpoint (hosts 1 and 2 did not go on)" '[ -e "$out/ckpt/step-000000000100.ckpt" ]'
demo 3  # a node joining the running job
wait "${pids[0]}"; rc1=$?
wait "${pids[1]}"; rc2=$?
wait "${pids[3]}"; rc3=$?
secs=$(($(date +%s) - start))
[ $rc1 = 0 ] || fail "host 1 exited $rc1"
[ $rc2 = 0 ] || fail "host 2 exited $rc2"
[ $rc3 = 0 ] || fail "host 3's second launcher exited $rc3"
grep -q "${p}h3) lost: no heartbeat" "$out/host1.log" "$out/host2.log" || fail "nobody named host 3 as lost"
grep -q "waiting to join; a new round with them" "$out/host1.log" "$out/host2.log" || fail "nobody saw host 3 join"
joined=$(grep -o 'in place: pid [0-9]* round [0-9]* rank [0-9] of 3$' "$out/host3.log" | grep -v "pid $before3 " | tail -1)
[ -n "$joined" ] || fail "host 3's second worker formed no group of 3"
new3=$(echo "$joined" | awk '{print $4}') round=$(echo "$joined" | awk '{print $6}')
for h in 1 2; do
  b=$([ $h = 1 ] && echo "$before1" || echo "$before2")
  grep -q "in place: pid $b round $round rank [0-2] of 3$" "$out/host$h.log" || fail "host $h's worker $b did not move in place to round $round with host 3"
  [ "$(grep -o 'in place: pid [0-9]*' "$out/host$h.log" | sort -u | wc -l)" = 1 ] || fail "host $h's worker was restarted"
done
synced=$(grep -ho "in place: pid [0-9]* round $round from step .*" "$out"/host*.log | sed 's/.* from step/from step/' | sort -u)
[ "$(echo "$synced" | wc -l)" = 1 ] || fail "round $round's ranks started from different states: $synced"
[ "$(echo "$synced" | awk '{print $3}' | tr -d ,)" -ge 100 ] || fail "round $round started before step 100: $synced"
[ "$(grep -c "in place: pid [0-9]* round $round from step" "$out"/host*.log | awk -F: '{s += $2} END {print s}')" = 3 ] ||
  fail "not 3 ranks of round $round said where they start"
! grep -q "restarting the workers" "$out"/host*.log || fail "a launcher restarted its workers"
grep -q "finished in place: round [0-9]*, 3 rank(s)" "$out"/host*.log || fail "no end on 3 ranks"
acc=$(sed -nE 's/^.*epoch 2\/2 .*test-acc +([0-9.]+)%.*/\1/p' "$out"/host*.log | tail -1)
[ -n "$acc" ] || fail "no line for epoch 2"
awk -v a="$acc" 'BEGIN { exit !(a >= 85) }' || fail "test accuracy $acc% < 85%"
assert_clean 1 2 3
echo "host 3 SIGKILLed mid-epoch 1, then back: hosts 1 and 2 went on in place (pids $before1, $before2) on 2, then on 3 with host 3's pid $new3 ($synced in round $round), test accuracy $acc% after 2 epochs, ${secs} s: ok"
