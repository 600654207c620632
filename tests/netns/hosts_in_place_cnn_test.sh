#!/usr/bin/env bash
# The demo CNN recovering in place across emulated hosts (tests/netns/hosts.sh,
# elastic_harness.sh): 3 hosts run ddp-launch --nnodes 2:3 (tcp rendezvous on host 1, heartbeats
# 0.2 s x 5), one worker each, ddp-train-fashion-mnist --elastic-in-place for 2 epochs on the
# whole data set. Once rank 0 wrote its step-50 checkpoint (mid epoch 1), host 3's launcher is
# SIGKILLed. Hosts 1 and 2 must finish (exit 0) on 2 nodes with the same worker PIDs as before,
# name host 3 as lost, reach a test accuracy >= 85%, and leave no worker or /dev/shm entry.
# Minutes: label "cluster". Exit 77 (Skipped) when not root, a tool or the data set is missing.
# usage: hosts_in_place_cnn_test.sh <bin dir> <source dir>
set -uo pipefail
bin=$1 src=$2
[ -d /usr/share/datasets/fashion-mnist ] || { echo "no Fashion-MNIST data set"; exit 77; }
. "$src/tests/netns/elastic_harness.sh"
harness_up inplacecnn 3
conf=keep_alive_interval=0.2,keep_alive_max_attempt=5,last_call_timeout=1

start=$(date +%s)
for h in $(seq 1 $n); do
  launch "$h" --nnodes 2:3 "$bin/ddp-train-fashion-mnist" --elastic-in-place --threads 1 --epochs 2 \
    --checkpoint "$out/ckpt" --checkpoint-every 50
done
wait_until 120 "no step-50 checkpoint" '[ -e "$out/ckpt/step-000000000050.ckpt" ]'
[ "$(cat "$out"/host*.log | grep -c 'in place: pid .* of 3$')" = 3 ] || fail "no group of 3"
pid_of() { grep -o 'in place: pid [0-9]*' "$out/host$1.log" | head -1 | awk '{print $4}'; }
before1=$(pid_of 1) before2=$(pid_of 2)
kill -KILL "${pids[2]}"
wait "${pids[0]}"; rc1=$?
wait "${pids[1]}"; rc2=$?
secs=$(($(date +%s) - start))
[ $rc1 = 0 ] || fail "host 1 exited $rc1"
[ $rc2 = 0 ] || fail "host 2 exited $rc2"
grep -q "${p}h3) lost: no heartbeat" "$out/host1.log" "$out/host2.log" || fail "nobody named host 3 as lost"
for h in 1 2; do
  b=$([ $h = 1 ] && echo "$before1" || echo "$before2")
  grep -q "in place: pid $b round [0-9]* rank [01] of 2$" "$out/host$h.log" || fail "host $h's worker $b formed no group of 2 in place"
  [ "$(grep -o 'in place: pid [0-9]*' "$out/host$h.log" | sort -u | wc -l)" = 1 ] || fail "host $h's worker was restarted"
done
grep -q "finished in place: round [0-9]*, 2 rank(s)" "$out"/host1.log "$out"/host2.log || fail "no end on 2 ranks"
acc=$(sed -nE 's/^.*epoch 2\/2 .*test-acc +([0-9.]+)%.*/\1/p' "$out"/host1.log "$out"/host2.log | tail -1)
[ -n "$acc" ] || fail "no line for epoch 2"
awk -v a="$acc" 'BEGIN { exit !(a >= 85) }' || fail "test accuracy $acc% < 85%"
assert_clean 1 2
echo "host 3 SIGKILLed mid-epoch 1: hosts 1 and 2 went on in place (pids $before1, $before2), test accuracy $acc% after 2 epochs, ${secs} s: ok"
