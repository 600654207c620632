#!/usr/bin/env bash
# A host whose link dies mid-collective (tests/netns/hosts.sh, 3 hosts x 2 ranks under
# ddp-launch, the tcp backend hierarchical: the cross-host step runs in child groups): hosts 1
# and 2 fail within seconds, a rank that saw it first naming a rank of the dead host by its world
# rank (4 or 5). The bound comes from the cross-host sockets' keepalive and TCP_USER_TIMEOUT
# (kLinkLossDetection, 8 s); DDP_TIMEOUT_MS=20000 bounds an op that waits on it, later, so the
# error is the link's; the launchers' heartbeat bound (--rdzv-conf keep_alive_*, 30 s) is set
# above both, so that the workers see the loss before their launchers stop them (the heartbeat is
# launcher_agent_loop_test's and netns_hosts_elastic_test's). The workers are ddp_fault_worker,
# all_reduce of 1M floats in a loop (LINK_DOWN_COUNT floats if set), every result checked.
# Exit 77 (Skipped) when not root or a tool is missing.
# usage: hosts_link_down_test.sh <bin dir> <tests dir> <source dir>
set -uo pipefail
bin=$1 tests=$2 src=$3
hosts="sh $src/tests/netns/hosts.sh"
[ "$(id -u)" = 0 ] || { echo "needs root (network namespaces)"; exit 77; }
$hosts sweep
p=ddpM$$x5 n=3
$hosts up "$p" $n || { rc=$?; [ $rc = 77 ] && echo "hosts.sh: skipped (tools missing)"; exit $rc; }
out=$(mktemp -d)
pids=()
cleanup() {
  for pid in "${pids[@]}"; do kill -TERM "$pid" 2> /dev/null; done
  for _ in $(seq 30); do
    alive=0
    for pid in "${pids[@]}"; do kill -0 "$pid" 2> /dev/null && alive=1; done
    [ $alive = 0 ] && break
    sleep 0.1
  done
  for pid in "${pids[@]}"; do kill -KILL "$pid" 2> /dev/null; done
  $hosts down "$p" $n
  rm -rf "$out"
}
trap cleanup EXIT
fail() {
  for f in "$out"/host*.log; do echo "== $f"; tail -20 "$f"; done
  echo "FAIL: $*"
  exit 1
}

for h in $(seq 1 $n); do
  $hosts run "$p" "$h" env DDP_TIMEOUT_MS=20000 \
    "$bin/ddp-launch" --nnodes $n --nproc-per-node 2 --node-rank $((h - 1)) --master-addr 10.78.0.1 \
      --rdzv-conf keep_alive_interval=1,keep_alive_max_attempt=30 --local-addr "10.78.0.$h" "$tests/ddp_fault_worker" --backend tcp --dir "$out" --count "${LINK_DOWN_COUNT:-1048576}" \
    > "$out/host$h.log" 2>&1 &
  pids+=($!)
done
for _ in $(seq 300); do
  [ "$(ls "$out" | grep -c '^ready\.[0-9]*$')" = $((2 * n)) ] && break
  sleep 0.05
done
[ "$(ls "$out" | grep -c '^ready\.[0-9]*$')" = $((2 * n)) ] || fail "the ranks did not all start within 15 s"
sleep 0.2
$hosts link "$p" 3 down || fail "could not take host 3's link down"
start=$(date +%s%N)
# Hosts 1 and 2 fail: a rank on each reports an error (fault_worker's "rank R: <kind>:
# <message>"; its launcher then stops the other), and a rank that saw the dead host first names
# it: rank 4 or 5 by world rank. (Others may name a peer that failed before them: once one rank
# fails, the job comes down around it.)
errors() { cat "$out/host$1.log" 2> /dev/null | grep "fault_worker rank [0-3]: [A-Za-z]*Error: "; }
for _ in $(seq 400); do
  errors 1 > /dev/null && errors 2 > /dev/null && break
  sleep 0.05
done
ms=$((($(date +%s%N) - start) / 1000000))
errors 1 > /dev/null || fail "no rank on host 1 failed within ${ms} ms"
errors 2 > /dev/null || fail "no rank on host 2 failed within ${ms} ms"
sleep 0.5  # the rest of the lines
seen=$(errors 1; errors 2)  # (not piped into grep -q: under pipefail, its early exit is a failed pipe)
grep -q "rank [45] (pid [0-9]* on ${p}h3" <<< "$seen" || fail "no rank on hosts 1 and 2 named rank 4 or 5 (host 3)"
echo "$seen"
echo "link down: hosts 1 and 2 failed within ${ms} ms, naming host 3's ranks: ok"
