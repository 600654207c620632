#!/usr/bin/env bash
# The tcp backend across two "hosts" with two ranks on each (network namespaces, root only):
# ddp-launch --nnodes 2 --nproc-per-node 2 in each, running the conformance matrix
# (tests/comm/conformance, launched mode) against the tcp backend. The world group must come
# up hierarchical (shared memory within each namespace, sockets between: the debug log says so),
# and the matrix's subgroups cover the other layouts: one host (shm), 2+1 ranks (flat sockets).
# DDP_TCP_HIERARCHY_SMALL_BYTES=0 sends small counts through the reduce_scatter/all_gather path
# too. Then a hierarchy setting that is not a byte count (DDP_TCP_HIERARCHY_SEGMENT_BYTES=-1):
# every rank fails naming it, no hang. Exit 77 (Skipped) when not root or iproute2 is missing.
# usage: hierarchical_test.sh <bin dir> <tests dir> <source dir>
set -uo pipefail
bin=$1 tests=$2 src=$3
{ [ "$(id -u)" = 0 ] && command -v ip > /dev/null; } || { echo "needs root and iproute2"; exit 77; }
pair="sh $src/tests/netns/netns_pair.sh"
a=ddpA$$x7 b=ddpB$$x7
$pair sweep
$pair up "$a" "$b" || exit 1
out=$(mktemp -d)
trap '$pair down "$a" "$b"; rm -rf "$out"' EXIT

k=0
pids=()
for ns in "$a" "$b"; do
  ip netns exec "$ns" env DDP_CONFORMANCE_BACKEND=tcp DDP_TCP_HIERARCHY_SMALL_BYTES=0 DDP_LOG_LEVEL=debug \
    "$bin/ddp-launch" --nnodes 2 --nproc-per-node 2 --node-rank $k --master-addr 10.77.0.1 \
      --local-addr 10.77.0.$((k + 1)) \
      "$tests/comm_conformance" "--test-case=conformance: every op*,conformance: large counts*" \
    > "$out/node$k.log" 2>&1 &
  pids+=($!)
  k=$((k + 1))
done
status=0
for pid in "${pids[@]}"; do wait "$pid" || status=1; done
if [ $status != 0 ]; then
  for f in "$out"/node*.log; do echo "== $f"; grep -v "\] \[debug\]" "$f" | tail -40; done
  echo "FAIL: the conformance matrix failed across two hosts"
  exit 1
fi
n=$(cat "$out"/node*.log | grep -c "group 'world': hierarchical, 2 hosts x 2 ranks")
[ "$n" = 4 ] || { echo "FAIL: $n of 4 ranks built the world group hierarchical"; exit 1; }
grep -h "test cases:" "$out"/node*.log | head -4

k=0
pids=()
for ns in "$a" "$b"; do
  ip netns exec "$ns" env DDP_CONFORMANCE_BACKEND=tcp DDP_TCP_HIERARCHY_SEGMENT_BYTES=-1 timeout 60 \
    "$bin/ddp-launch" --nnodes 2 --nproc-per-node 2 --node-rank $k --master-addr 10.77.0.1 \
      --local-addr 10.77.0.$((k + 1)) "$tests/comm_conformance" "--test-case=conformance: every op*" \
    > "$out/bad$k.log" 2>&1 &
  pids+=($!)
  k=$((k + 1))
done
for k in 0 1; do
  if wait "${pids[$k]}"; then echo "FAIL: node $k ran with DDP_TCP_HIERARCHY_SEGMENT_BYTES=-1"; exit 1; fi
  grep -q "DDP_TCP_HIERARCHY_SEGMENT_BYTES='-1': an integer of at least 0" "$out/bad$k.log" ||
    { cat "$out/bad$k.log"; echo "FAIL: node $k did not name DDP_TCP_HIERARCHY_SEGMENT_BYTES"; exit 1; }
done
echo "hierarchical: ok"
