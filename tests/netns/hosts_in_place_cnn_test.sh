#!/usr/bin/env bash
# The demo CNN recovering in place across emulated hosts (tests/netns/hosts.sh): 3 hosts run
# ddp-launch --nnodes 2:3 (tcp rendezvous on host 1, heartbeats 0.2 s x 5), one worker each,
# ddp-train-fashion-mnist --elastic-in-place for 2 epochs on the whole data set. Once rank 0 wrote
# its step-50 checkpoint (mid epoch 1), host 3's launcher is SIGKILLed. Hosts 1 and 2 must finish
# (exit 0) on 2 nodes with the same worker PIDs as before, name host 3 as lost, reach a test
# accuracy >= 85%, and leave no worker or /dev/shm entry. Minutes: label "cluster". Exit 77
# (Skipped) when not root, a tool or the data set is missing.
# usage: hosts_in_place_cnn_test.sh <bin dir> <source dir>
set -uo pipefail
bin=$1 src=$2
hosts="sh $src/tests/netns/hosts.sh"
[ "$(id -u)" = 0 ] || { echo "needs root (network namespaces)"; exit 77; }
[ -d /usr/share/datasets/fashion-mnist ] || { echo "no Fashion-MNIST data set"; exit 77; }
$hosts sweep
p=ddpM$$x9 n=3
$hosts up "$p" $n || { rc=$?; [ $rc = 77 ] && echo "hosts.sh: skipped (tools missing)"; exit $rc; }
out=$(mktemp -d)
chmod 777 "$out"
pids=()
cleanup() {
  for pid in "${pids[@]}"; do kill -KILL "$pid" 2> /dev/null; done
  $hosts down "$p" $n
  rm -rf "$out"
}
trap cleanup EXIT
fail() {
  for f in "$out"/host*.log; do echo "== $f"; tail -40 "$f"; done
  echo "FAIL: $*"
  exit 1
}

start=$(date +%s)
for h in $(seq 1 $n); do
  $hosts run "$p" "$h" "$bin/ddp-launch" --nnodes 2:3 --rdzv-backend c10d --rdzv-endpoint 10.78.0.1:29400 \
    --rdzv-id "inplacecnn$$" --local-addr "10.78.0.$h" --monitor-interval 0.1 --shutdown-timeout 2 \
    --rdzv-conf keep_alive_interval=0.2,keep_alive_max_attempt=5,last_call_timeout=1 \
    "$bin/ddp-train-fashion-mnist" --elastic-in-place --threads 1 --epochs 2 \
    --checkpoint "$out/ckpt" --checkpoint-every 50 > "$out/host$h.log" 2>&1 &
  pids+=($!)
  [ "$h" = 1 ] && sleep 0.3  # host 1 binds the endpoint (its address) before the others connect
done
for _ in $(seq 1200); do
  [ -e "$out/ckpt/step-000000000050.ckpt" ] && break
  sleep 0.1
done
[ -e "$out/ckpt/step-000000000050.ckpt" ] || fail "no step-50 checkpoint within 120 s"
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
for h in 1 2; do
  left=$($hosts run "$p" "$h" sh -c 'ls -A /dev/shm')
  [ -z "$left" ] || fail "host $h's /dev/shm holds: $left"
done
left=$(grep -l "DDP_RUN_ID=inplacecnn$$" /proc/[0-9]*/environ 2> /dev/null)
[ -z "$left" ] || fail "processes of the job are left: $left"
echo "host 3 SIGKILLed mid-epoch 1: hosts 1 and 2 went on in place (pids $before1, $before2), test accuracy $acc% after 2 epochs, ${secs} s: ok"
