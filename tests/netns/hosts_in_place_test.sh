#!/usr/bin/env bash
# Recovery in place across emulated hosts (tests/netns/hosts.sh). 2 hosts run ddp-launch
# --nnodes 1:2 over a tcp rendezvous hosted on host 1 (heartbeats 0.2 s x 5), each one worker,
# ddp_elastic_probe (ddp/elastic.h: a counter all_reduced every step, committed). Once both
# workers are in a group of 2, host 2's launcher is SIGKILLed (its worker dies with it). Host 1's
# worker must go on in place: the same PID in a group of 1 of a later round, and finish (exit 0);
# the log names host 2 as lost; no worker or /dev/shm entry is left. A few seconds. Exit 77
# (Skipped) when not root or a tool is missing.
# usage: hosts_in_place_test.sh <bin dir> <tests bin dir> <source dir>
set -uo pipefail
bin=$1 tbin=$2 src=$3
hosts="sh $src/tests/netns/hosts.sh"
[ "$(id -u)" = 0 ] || { echo "needs root (network namespaces)"; exit 77; }
$hosts sweep
p=ddpM$$x8 n=2
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

for h in $(seq 1 $n); do
  $hosts run "$p" "$h" "$bin/ddp-launch" --nnodes 1:2 --rdzv-backend c10d --rdzv-endpoint 10.78.0.1:29400 \
    --rdzv-id "inplace$$" --local-addr "10.78.0.$h" --monitor-interval 0.1 --shutdown-timeout 2 \
    --rdzv-conf keep_alive_interval=0.2,keep_alive_max_attempt=5,last_call_timeout=0.5 \
    "$tbin/ddp_elastic_probe" 150 20 > "$out/host$h.log" 2>&1 &
  pids+=($!)
  [ "$h" = 1 ] && sleep 0.3  # host 1 binds the endpoint (its address) before the others connect
done
twos() { cat "$out"/host*.log 2> /dev/null | grep -c 'group pid=.* world=2'; }
for _ in $(seq 300); do
  [ "$(twos)" = 2 ] && break
  sleep 0.05
done
[ "$(twos)" = 2 ] || fail "no group of 2 within 15 s"
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
left=$($hosts run "$p" 1 sh -c 'ls -A /dev/shm')
[ -z "$left" ] || fail "host 1's /dev/shm holds: $left"
left=$(grep -l "DDP_RUN_ID=inplace$$" /proc/[0-9]*/environ 2> /dev/null)
[ -z "$left" ] || fail "processes of the job are left: $left"
echo "host 2 SIGKILLed: host 1's worker (pid $before) went on in place ($after) and finished in ${ms} ms: ok"
