#!/usr/bin/env bash
# Elastic rounds across emulated hosts (tests/netns/hosts.sh: own network, hostname and /dev/shm
# each). 3 hosts run ddp-launch --nnodes 2:3 over a tcp rendezvous hosted on host 1, with
# heartbeats of 0.2 s x 5. Each worker logs "<GROUP_WORLD_SIZE> <host>" and waits; once all 3 are
# up, host 3's link goes down (the host cut off: no process dies, no connection is reset).
# Hosts 1 and 2 must name host 3 as lost by heartbeat, run a new round of 2 nodes and finish
# (exit 0); host 3's launcher loses the store and exits 122; no worker and no /dev/shm entry is
# left on any host. A few seconds. Exit 77 (Skipped) when not root or a tool is missing.
# usage: hosts_elastic_test.sh <bin dir> <source dir>
set -uo pipefail
bin=$1 src=$2
hosts="sh $src/tests/netns/hosts.sh"
[ "$(id -u)" = 0 ] || { echo "needs root (network namespaces)"; exit 77; }
$hosts sweep
p=ddpM$$x7 n=3
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
  for f in "$out"/host*.log; do echo "== $f"; tail -30 "$f"; done
  echo "FAIL: $*"
  exit 1
}

worker='echo "$GROUP_WORLD_SIZE $(hostname)" >> '"$out"'/log.$(hostname);
while true; do [ -e '"$out"'/go ] && [ "$GROUP_WORLD_SIZE" = 2 ] && exit 0; sleep 0.05; done'
for h in $(seq 1 $n); do
  $hosts run "$p" "$h" "$bin/ddp-launch" --nnodes 2:3 --rdzv-backend c10d --rdzv-endpoint 10.78.0.1:29400 \
    --rdzv-id "elastic$$" --local-addr "10.78.0.$h" --monitor-interval 0.1 --shutdown-timeout 2 \
    --rdzv-conf keep_alive_interval=0.2,keep_alive_max_attempt=5,last_call_timeout=0.5 \
    sh -c "$worker" > "$out/host$h.log" 2>&1 &
  pids+=($!)
  [ "$h" = 1 ] && sleep 0.3  # host 1 binds the endpoint (its address) before the others connect
done
threes() { cat "$out"/log.* 2> /dev/null | grep -c '^3 '; }
for _ in $(seq 300); do
  [ "$(threes)" = 3 ] && break
  sleep 0.05
done
[ "$(threes)" = 3 ] || fail "no round of 3 nodes within 15 s"
touch "$out/go"
$hosts link "$p" 3 down || fail "could not take host 3's link down"
start=$(date +%s%N)
wait "${pids[0]}"; rc1=$?
wait "${pids[1]}"; rc2=$?
ms=$((($(date +%s%N) - start) / 1000000))
wait "${pids[2]}"; rc3=$?
[ $rc1 = 0 ] || fail "host 1 exited $rc1"
[ $rc2 = 0 ] || fail "host 2 exited $rc2"
[ $rc3 = 122 ] || fail "host 3 exited $rc3, not 122"
grep -q "${p}h3) lost: no heartbeat" "$out/host1.log" "$out/host2.log" || fail "nobody named host 3 as lost"
grep -q "rendezvous store at 10.78.0.1:29400" "$out/host3.log" || fail "host 3 did not name the lost store"
[ "$(grep -c '^2 ' "$out/log.${p}h1")" -ge 1 ] || fail "host 1 ran no round of 2 nodes"
for h in $(seq 1 $n); do
  left=$($hosts run "$p" "$h" sh -c 'ls -A /dev/shm')
  [ -z "$left" ] || fail "host $h's /dev/shm holds: $left"
done
left=$(grep -l "DDP_RUN_ID=elastic$$" /proc/[0-9]*/environ 2> /dev/null)
[ -z "$left" ] || fail "processes of the job are left: $left"
echo "host 3 cut off: hosts 1 and 2 finished a round of 2 in ${ms} ms; host 3 exited 122: ok"
