#!/usr/bin/env bash
# The demo CNN in place over --rdzv-backend etcd, node 0 lost (issue 54): 3 emulated hosts
# (tests/netns/hosts.sh, elastic_harness.sh), each with a member of one 3-member etcd cluster and
# a launcher (etcd_cluster.sh): --nnodes 2:3 with all three members as --rdzv-endpoint, heartbeats
# 1 s x 5, one worker each, ddp-train-fashion-mnist --elastic-in-place for 2 epochs on the whole
# data set. Host 1 starts first, so it is node 0 of round 0. Once rank 0 wrote its step-50
# checkpoint (mid epoch 1), host 1 is powered off (its launcher, worker and etcd member
# SIGKILLed, its link down): hosts 2 and 3 must name node 0 lost, keep their workers (same PIDs)
# and move them in place to a group of 2 that starts from one state (the same step and parameter
# sum on both ranks), write the later checkpoints, and finish on 2 ranks (exit 0) with a test
# accuracy >= 85%: no restart counted, no process of the job or /dev/shm entry left on hosts 2
# and 3. Prints the time from the power-off to the group of 2. Minutes: label "cluster". Exit 77
# (Skipped) when not root, a tool, /usr/bin/etcd or the data set is missing.
# usage: hosts_etcd_cnn_test.sh <bin dir> <source dir>
set -uo pipefail
bin=$1 src=$2
[ -d /usr/share/datasets/fashion-mnist ] || { echo "no Fashion-MNIST data set: skipped"; exit 77; }
[ -x /usr/bin/etcd ] || { echo "no /usr/bin/etcd: skipped"; exit 77; }
. "$src/tests/netns/elastic_harness.sh"
harness_up etcdcnn 3
# A 5 s bound: CI runs this beside the ASan suite and a build, where 2 s can evict a live host.
conf=keep_alive_interval=1,keep_alive_max_attempt=5,last_call_timeout=1
. "$src/tests/netns/etcd_cluster.sh"
etcd_up

# --checkpoint: etcd implies no filesystem shared between the hosts, and a real job would give
# each node its own directory or a shared one; here every host sees the same filesystem ($out), as
# in hosts_in_place_cnn_test.sh, so whichever rank 0 the round has writes to the one directory.
demo() {
  launch_etcd "$1" "$bin/ddp-train-fashion-mnist" --elastic-in-place --threads 1 --epochs 2 \
    --checkpoint "$out/ckpt" --checkpoint-every 50
}
# in_group PID N H: worker PID formed a group of N on host H.
in_group() { grep -q "in place: pid $1 round [0-9]* rank [0-9] of $2\$" "$out/host$3.log"; }
pid_of() { grep -o 'in place: pid [0-9]*' "$out/host$1.log" | head -1 | awk '{print $4}'; }

start=$(date +%s)
demo 1
wait_until 20 "host 1 joining round 0" 'grep -qs "joining round 0" "$out/host1.log"'
demo 2
demo 3
wait_until 180 "no step-50 checkpoint" '[ -e "$out/ckpt/step-000000000050.ckpt" ]'
grep -q "round 0: node 0/3" "$out/host1.log" || fail "host 1 is not node 0 of round 0"
before1=$(pid_of 1) before2=$(pid_of 2) before3=$(pid_of 3)
in_group "$before1" 3 1 && in_group "$before2" 3 2 && in_group "$before3" 3 3 || fail "no group of 3"
power_off 1
off=$(date +%s.%N)
wait_until 60 "hosts 2 and 3 in no group of 2" 'in_group "$before2" 2 2 && in_group "$before3" 2 3'
grouped_ms=$(awk -v a="$off" -v b="$(date +%s.%N)" 'BEGIN { printf "%d", (b - a) * 1000 }')
# The demo keeps its newest 2 checkpoints: step 100 is seen while it is there.
wait_until 120 "no step-100 checkpoint (hosts 2 and 3 did not go on)" \
  '[ -e "$out/ckpt/step-000000000100.ckpt" ]'
for h in 2 3; do
  wait "${launcher[$h]}"
  rc=$?
  [ $rc = 0 ] || fail "host $h's launcher exited $rc"
done
secs=$(($(date +%s) - start))
for h in 2 3; do
  log=$out/host$h.log
  grep -q "node 0 (${p}h1) lost: no heartbeat" "$log" || fail "host $h did not name host 1 (node 0) lost"
  grep -q "with the workers in place" "$log" || fail "host $h did not keep its worker"
  ! grep -q "restarting the workers" "$log" || fail "host $h counted the loss as a restart"
  [ "$(grep -o 'in place: pid [0-9]*' "$log" | sort -u | wc -l)" = 1 ] ||
    fail "host $h's worker was restarted"
done
round=$(grep -o "in place: pid $before2 round [0-9]* rank [01] of 2\$" "$out/host2.log" | tail -1 |
  awk '{print $6}')
grep -q "in place: pid $before3 round $round rank [01] of 2\$" "$out/host3.log" ||
  fail "host 3's worker $before3 was not in host 2's group of 2 (round $round)"
# Each rank of the group of 2 says where it starts: after the state's broadcast, one step and sum.
starts=$(grep -ho "in place: pid [0-9]* round $round from step .*" "$out"/host[23].log)
[ "$(echo "$starts" | grep -c .)" = 2 ] || fail "not 2 ranks of round $round said where they start"
synced=$(echo "$starts" | sed 's/.* from step/from step/' | sort -u)
[ "$(echo "$synced" | wc -l)" = 1 ] || fail "round $round's ranks started from different states: $synced"
[ "$(echo "$synced" | awk '{print $3}' | tr -d ,)" -ge 50 ] ||
  fail "round $round started before step 50: $synced"
grep -q "finished in place: round $round, 2 rank(s)" "$out"/host[23].log ||
  fail "no end on 2 ranks in round $round"
acc=$(sed -nE 's/^.*epoch 2\/2 .*test-acc +([0-9.]+)%.*/\1/p' "$out"/host[23].log | tail -1)
[ -n "$acc" ] || fail "no line for epoch 2"
awk -v a="$acc" 'BEGIN { exit !(a >= 85) }' || fail "test accuracy $acc% < 85%"
stop_members 2 3
assert_clean 2 3
echo "host 1 (node 0, with an etcd member) powered off after step 50: hosts 2 and 3 went on in place" \
  "(pids $before2, $before3) on 2 ranks ${grouped_ms} ms later ($synced in round $round), test accuracy" \
  "$acc% after 2 epochs, ${secs} s: ok"
