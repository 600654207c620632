#!/usr/bin/env bash
# An unmodified PyTorch script through a node lost and a node joining (tests/netns/hosts.sh,
# elastic_harness.sh): 3 emulated hosts run ddp-launch --nnodes 2:3, one worker each, of
# tests/netns/torch_checkpoint_job.py (env://, gloo, DDP over a float64 MLP, SGD with momentum,
# rank 0's checkpoint every 5 steps, resumed from when started again; its data differ by rank, so
# its final state is a function of the world each step was taken at). Heartbeats 1 s x 5. The
# script holds (--hold) so the events fall at known steps:
#   - at world 3 with steps 1..22 taken, host 3's worker holds before step 23 while hosts 1 and 2
#     wait in step 23's all_reduce; host 3's launcher and worker are SIGKILLed: the survivors'
#     workers fail on the reset connection (a loss, not a restart counted), hosts 1 and 2 name
#     host 3 lost and start new workers at world 2, which resume from the step-20 checkpoint;
#   - at world 2 with steps 21..37 taken (every rank holds before 38), host 3's launcher starts
#     again: a round of 3 whose workers resume from the step-35 checkpoint and finish 60 steps.
# Asserted: the survivors' workers failed on gloo's lost connection; each round's workers start
# from the checkpoint named above; the worlds the steps were last taken at (the logs) are
# 3x20,2x15,3x25; the 3 final ranks hold the same parameters (one digest) and the loss and
# parameter norm a single-process reference computes for that schedule (relative 1e-9: float64,
# only the order of the sums differs); no restart counted; every launcher alive at the end exits
# 0; no process of the job nor /dev/shm entry left on any host.
# c10d: the store on host 1's launcher. etcd: a 3-member cluster, one member per host
# (etcd_cluster.sh; host 3's member stays up). About 20 s (c10d) and 25 s (etcd) at load 5. Exit
# 77 (Skipped) when not root, a tool is missing, /usr/bin/python3 has no torch, or (etcd)
# /usr/bin/etcd is missing.
# usage: hosts_torch_checkpoint_test.sh <bin dir> <source dir> c10d|etcd
set -uo pipefail
bin=$1 src=$2 mode=$3
. "$src/tests/netns/elastic_harness.sh"
case $mode in c10d | etcd) ;; *) echo "unknown mode $mode"; exit 2 ;; esac
/usr/bin/python3 -c 'import torch.distributed' 2> /dev/null || { echo "no torch in /usr/bin/python3: skipped"; exit 77; }
[ "$mode" = c10d ] || [ -x /usr/bin/etcd ] || { echo "no /usr/bin/etcd: skipped"; exit 77; }
harness_up "torchckpt-$mode" 3
# A 5 s bound: CI runs the netns tests beside a build, where a shorter one can evict a live host.
conf=keep_alive_interval=1,keep_alive_max_attempt=5,last_call_timeout=1
[ "$mode" = c10d ] || { . "$src/tests/netns/etcd_cluster.sh"; etcd_up; }
export GLOO_SOCKET_IFNAME=veth0 # gloo's address: the host's link, not its (unresolvable) hostname

script=$src/tests/netns/torch_checkpoint_job.py
steps=60 every=5 kill_at=23 join_at=38
c1=$(((kill_at - 1) / every * every)) c2=$(((join_at - 1) / every * every))
want="3x$c1,2x$((c2 - c1)),3x$((steps - c2))"
mkdir "$out/ckpt"
job=(/usr/bin/python3 "$script" "$steps" "$out/ckpt" "$every"
  --hold "$kill_at" "$out/go1-{host}" --hold "$join_at" "$out/go2")
touch "$out/go1-${p}h1" "$out/go1-${p}h2" # host 3 alone holds before step $kill_at
declare -A lpid
start_host() {
  if [ "$mode" = etcd ]; then launch_etcd "$1" "${job[@]}"; else launch "$1" --nnodes 2:3 "${job[@]}"; fi
  lpid[$1]=${pids[-1]}
}
# running H...: fail at once when the launcher of a host H exited (a wait would only time out).
running() { for h; do kill -0 "${lpid[$h]}" 2> /dev/null || fail "host $h's launcher exited early"; done; }
# started W FROM: how many workers said they formed a group of W, resuming from step FROM (a regex).
started() { cat "$out"/host*.log | grep -c "^start pid=[0-9]* rank=[0-2] world=$1 from=$2\$"; }
# took S W: how many ranks printed step S at world W.
took() { cat "$out"/host*.log | grep -c "^step $1 rank=[0-2] world=$2 "; }

# schedule_taken: the world each step was last taken at (a step taken again after a rollback:
# its later print), from every host's log, as WORLDxCOUNT runs (e.g. 3x20,2x15,3x25).
schedule_taken() {
  cat "$out"/host*.log | awk '/^step / { sub("world=", "", $4); sub("t=", "", $5); print $5, $2, $4 }' |
    sort -n | awk '{ w[$2] = $3 }
      END {
        for (s = 1; s in w; s++) {
          if (w[s] != c) { if (c) { printf "%s%dx%d", sep, c, k; sep = "," } c = w[s]; k = 0 }
          k++
        }
        printf "%s%dx%d\n", sep, c, k
      }'
}
# close NAME: NAME= in $got (a rank's done line) is within 1e-9 (relative) of NAME= in $ref.
close() {
  local a b
  a=$(echo "$got" | grep -o " $1=[^ ]*" | cut -d= -f2) b=$(echo "$ref" | grep -o " $1=[^ ]*" | cut -d= -f2)
  awk -v a="$a" -v b="$b" 'BEGIN { d = a - b; m = b; if (d < 0) d = -d; if (m < 0) m = -m
    exit !(a != "" && d <= 1e-9 * (m > 1 ? m : 1)) }'
}

begin=$SECONDS
for h in 1 2 3; do start_host "$h"; done
wait_until 120 "a group of 3" 'running 1 2 3 && [ "$(started 3 0)" = 3 ]'
wait_until 60 "3 ranks at step $((kill_at - 1))" 'running 1 2 3 && [ "$(took $((kill_at - 1)) 3)" = 3 ]'
victim=$(grep -o "^start pid=[0-9]*" "$out/host3.log" | cut -d= -f2)
kill -KILL "${lpid[3]}" "$victim"
{ wait "${lpid[3]}"; } 2> /dev/null # reaped: no "Killed" notice in the output
wait_until 120 "a group of 2 after host 3's loss" 'running 1 2 && [ "$(started 2 "[0-9]*")" -ge 2 ]'
[ "$(started 2 $c1)" = 2 ] ||
  fail "the group of 2 did not resume from the step-$c1 checkpoint: $(grep -h '^start' "$out"/host*.log)"
wait_until 60 "2 ranks at step $((join_at - 1))" 'running 1 2 && [ "$(took $((join_at - 1)) 2)" = 2 ]'
start_host 3
wait_until 120 "a group of 3 after host 3 joined" 'running 1 2 3 && [ "$(started 3 "[0-9]*")" -ge 6 ]'
[ "$(started 3 $c2)" = 3 ] ||
  fail "the group of 3 did not resume from the step-$c2 checkpoint: $(grep -h '^start' "$out"/host*.log)"
touch "$out/go2"
ended() { for h in 1 2 3; do ! kill -0 "${lpid[$h]}" 2> /dev/null || return 1; done; }
wait_until 120 "every launcher ending" ended
for h in 1 2 3; do
  wait "${lpid[$h]}"
  rc=$?
  [ $rc = 0 ] || fail "host $h's launcher exited $rc"
done
secs=$((SECONDS - begin))

grep -q "(${p}h3) lost: no heartbeat" "$out/host1.log" "$out/host2.log" || fail "nobody named host 3 as lost"
for h in 1 2; do
  grep -q "^RuntimeError: .*gloo/transport/" "$out/host$h.log" || fail "host $h's worker did not fail on gloo's connection"
done
grep -q "waiting to join" "$out/host1.log" "$out/host2.log" || fail "nobody saw host 3 join"
! grep -q "restarting the workers" "$out"/host*.log || fail "a membership change was counted as a restart"
taken=$(schedule_taken)
[ "$taken" = "$want" ] || fail "steps taken at worlds $taken, not $want"
done_lines=$(grep -h "^done pid=" "$out"/host*.log)
[ "$(echo "$done_lines" | grep -c "^done pid=[0-9]* rank=[0-2] world=3 steps=$steps ")" = 3 ] ||
  fail "not 3 ranks finished $steps steps at world 3: $done_lines"
[ "$(echo "$done_lines" | sed 's/.* loss=//' | sort -u | wc -l)" = 1 ] || fail "the ranks disagree: $done_lines"
ref=$(/usr/bin/python3 "$script" --reference "$want") || fail "the reference did not run: $ref"
got=$(echo "$done_lines" | head -1)
if ! close loss || ! close norm; then fail "the ranks finished with '$got', the reference for $want: '$ref'"; fi
[ "$mode" = c10d ] || stop_members 1 2 3
assert_clean 1 2 3
echo "host 3 SIGKILLed at step $((kill_at - 1)), then back at step $((join_at - 1)) ($mode): resumed from steps $c1" \
  "(world 2) and $c2 (world 3), $want steps, every rank at the reference ($ref), ${secs} s: ok"
