#!/usr/bin/env bash
# Elastic rounds across emulated hosts (tests/netns/hosts.sh: own network, hostname and /dev/shm
# each; elastic_harness.sh). 3 hosts run ddp-launch --nnodes 2:3 over a tcp rendezvous hosted on
# host 1, with heartbeats of 0.2 s x 5. Each worker logs "<GROUP_WORLD_SIZE> <host>" and waits;
# once all 3 are up, host 3's link goes down (the host cut off: no process dies, no connection is
# reset). Hosts 1 and 2 must name host 3 as lost by heartbeat, run a new round of 2 nodes and
# finish (exit 0); host 3's launcher loses the store and exits 122; no worker and no /dev/shm
# entry is left on any host. A few seconds. Exit 77 (Skipped) when not root or a tool is missing.
# usage: hosts_elastic_test.sh <bin dir> <source dir>
set -uo pipefail
bin=$1 src=$2
. "$src/tests/netns/elastic_harness.sh"
harness_up elastic 3

worker='echo "$GROUP_WORLD_SIZE $(hostname)" >> '"$out"'/log.$(hostname);
while true; do [ -e '"$out"'/go ] && [ "$GROUP_WORLD_SIZE" = 2 ] && exit 0; sleep 0.05; done'
for h in $(seq 1 $n); do launch "$h" --nnodes 2:3 sh -c "$worker"; done
threes() { cat "$out"/log.* 2> /dev/null | grep -c '^3 '; }
wait_until 15 "no round of 3 nodes" '[ "$(threes)" = 3 ]'
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
assert_clean 1 2 3
echo "host 3 cut off: hosts 1 and 2 finished a round of 2 in ${ms} ms; host 3 exited 122: ok"
