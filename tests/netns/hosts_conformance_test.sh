#!/usr/bin/env bash
# The tcp backend's conformance matrix across emulated hosts (tests/netns/hosts.sh: each host its
# own network, IPC and mount namespace, its own /dev/shm), HOSTS hosts x 2 ranks under
# ddp-launch, every op and the large counts. TRANSPORT:
#   hierarchical  the world group must come up hierarchical (shared memory within each host,
#                 sockets between: the debug log says so on every rank); first every op and a
#                 late rank as by default (small all_reduces whole, within the host then across,
#                 up to the limit each group measures when made: DDP_TCP_HIERARCHY_SMALL_BYTES=auto),
#                 then the matrix with small counts on
#                 the reduce_scatter/all_gather path too (DDP_TCP_HIERARCHY_SMALL_BYTES=0), and
#                 all_reduces of 8 KiB and up run in pipelined segments
#                 (DDP_TCP_HIERARCHY_SEGMENT_BYTES=4096: 4 Ki + 3 elements in 4, large counts in 8),
#                 their steps within the host on a second thread (DDP_TCP_HIERARCHY_OVERLAP=1).
#   flat          DDP_TCP_TRANSPORT=socket: sockets between every pair.
#   streams       hierarchical with 2 connections between each pair of the cross-host step
#                 (DDP_TCP_SOCKET_STREAMS=2: its chunks take turns on them), segments in turn
#                 (DDP_TCP_HIERARCHY_OVERLAP=0).
#   large-flat    hierarchical, every all_reduce flat over the group's sockets
#                 (DDP_TCP_HIERARCHY_SMALL_BYTES=0 DDP_TCP_HIERARCHY_LARGE=flat), the other ops
#                 hierarchical. In the hierarchical mode (DDP_TCP_HIERARCHY_LARGE=auto) the ranks
#                 must have agreed on the way of some all_reduces (split or flat) by summing
#                 their figures, each decision logged alike by every rank.
#   gloo          hierarchical with the step between hosts on Gloo (DDP_TCP_INTER=gloo), in
#                 overlapped segments as above; Skipped (77) when this build has no gloo backend.
# The matrix's subgroups cover the other layouts (one host, uneven hosts); its world of 4 in group
# memory must have had the hosts' shared memory. Exit 77 (Skipped) when not root or a tool is
# missing.
# usage: [GLOO_BUILT=1] hosts_conformance_test.sh <bin dir> <tests dir> <source dir> HOSTS
#          hierarchical|flat|streams|large-flat|gloo
set -uo pipefail
bin=$1 tests=$2 src=$3 n=$4 mode=$5
GLOO_BUILT=${GLOO_BUILT:-0}
hosts="sh $src/tests/netns/hosts.sh"
[ "$(id -u)" = 0 ] || { echo "needs root (network namespaces)"; exit 77; }
[ "$mode" != gloo ] || [ "$GLOO_BUILT" = 1 ] || { echo "gloo backend not built"; exit 77; }
$hosts sweep
p=ddpM$$x4
$hosts up "$p" "$n" || { rc=$?; [ $rc = 77 ] && echo "hosts.sh: skipped (tools missing)"; exit $rc; }
out=$(mktemp -d)
trap '$hosts down "$p" "$n"; rm -rf "$out"' EXIT

case "$mode" in
  hierarchical) extra=(DDP_TCP_HIERARCHY_SMALL_BYTES=0 DDP_TCP_HIERARCHY_SEGMENT_BYTES=4096
    DDP_TCP_HIERARCHY_OVERLAP=1) ;;
  flat) extra=(DDP_TCP_TRANSPORT=socket) ;;
  streams) extra=(DDP_TCP_HIERARCHY_SMALL_BYTES=0 DDP_TCP_SOCKET_STREAMS=2 DDP_TCP_HIERARCHY_OVERLAP=0) ;;
  large-flat) extra=(DDP_TCP_HIERARCHY_SMALL_BYTES=0 DDP_TCP_HIERARCHY_LARGE=flat DDP_TCP_HIERARCHY_OVERLAP=0) ;;
  gloo) extra=(DDP_TCP_HIERARCHY_SMALL_BYTES=0 DDP_TCP_HIERARCHY_SEGMENT_BYTES=4096 DDP_TCP_INTER=gloo
    DDP_TCP_HIERARCHY_OVERLAP=1) ;;
  *) echo "mode: hierarchical, flat, streams, large-flat or gloo"; exit 2 ;;
esac
# Runs the conformance binary on every host under ddp-launch with the given filter and extra
# environment; logs in $out/host*.log. Fails the test (printing the logs' tails) on any failure.
run_matrix() {
  local filter=$1 what=$2
  shift 2
  local pids=() status=0
  for h in $(seq 1 "$n"); do
    $hosts run "$p" "$h" env DDP_CONFORMANCE_BACKEND=tcp DDP_LOG_LEVEL=debug "$@" \
      "$bin/ddp-launch" --nnodes "$n" --nproc-per-node 2 --node-rank $((h - 1)) --master-addr 10.78.0.1 \
        --local-addr "10.78.0.$h" "$tests/comm_conformance" "--test-case=$filter" \
      > "$out/host$h.log" 2>&1 &
    pids+=($!)
  done
  for pid in "${pids[@]}"; do wait "$pid" || status=1; done
  if [ $status != 0 ]; then
    for f in "$out"/host*.log; do echo "== $f"; grep -v "\] \[debug\]" "$f" | tail -40; done
    echo "FAIL: the conformance matrix failed across $n hosts ($mode$what)"
    exit 1
  fi
}

# A hierarchy's all_reduces as users get them (whole within the host, then across, up to the
# limit measured when each group is made), with late ranks: before the matrix, whose logs are
# checked below.
if [ "$mode" = hierarchical ] || [ "$mode" = gloo ]; then
  small=("${extra[@]}")
  small=("${small[@]/DDP_TCP_HIERARCHY_SMALL_BYTES=0/DDP_TCP_HIERARCHY_SMALL_BYTES=auto}")
  run_matrix "conformance: every op*,processes: a late rank*" ", small all_reduces whole" "${small[@]}"
fi
run_matrix "conformance: every op*,conformance: large counts*,processes: a late rank*" "" "${extra[@]}"
ranks=$((2 * n))
got=$(cat "$out"/host*.log | grep -c "group 'world': hierarchical, $n hosts x 2 ranks")
if [ "$mode" != flat ] && [ "$got" != "$ranks" ]; then
  echo "FAIL: $got of $ranks ranks built the world group hierarchical"; exit 1
fi
if [ "$mode" = flat ] && [ "$got" != 0 ]; then echo "FAIL: DDP_TCP_TRANSPORT=socket, yet hierarchical"; exit 1; fi
# Group memory on a hierarchical group (the conformance's world of 4 in it: ranks 0-3, on hosts 1
# and 2) is its host's shared memory, where its all_reduces' steps within the host run in place:
# each of those 4 ranks got some.
memory=$(cat "$out"/host*.log | grep -c "(hierarchical): [0-9]* bytes of group memory from its host's group, shared")
if [ "$mode" != flat ] && [ "$memory" -lt 4 ]; then
  echo "FAIL: $memory hierarchical allocations of shared group memory, fewer than the world of 4's ranks"; exit 1
fi
inter=$(cat "$out"/host*.log | grep -c "group 'world': hierarchical, .*between hosts: gloo")
if [ "$mode" = gloo ] && [ "$inter" != "$ranks" ]; then echo "FAIL: $inter of $ranks ranks went between hosts on gloo"; exit 1; fi
striped=$(cat "$out"/host*.log | grep -c "group 'world/across[0-9]*': 2 connections to each peer")
if [ "$mode" = streams ] && [ "$striped" != "$ranks" ]; then
  echo "FAIL: $striped of $ranks ranks opened 2 connections to each peer between hosts"; exit 1
fi
# Each decision on the way of large all_reduces, logged by every rank with the same sums: every
# distinct line a multiple of the ranks (group 'world'; other groups have other sizes).
read -r decided odd <<< "$(cat "$out"/host*.log | grep "group 'world': hierarchical all_reduce, .*every rank's summed)" |
  sed 's/^.*\] group/group/' | sort | uniq -c | awk -v r="$ranks" '{ n += $1 } $1 % r { bad++ } END { print n + 0, bad + 0 }')"
if [ "$mode" = hierarchical ] && { [ "$decided" = 0 ] || [ "$odd" != 0 ]; }; then
  echo "FAIL: the ranks logged $decided decisions on large all_reduces' way, $odd not by every rank"; exit 1
fi
if [ "$mode" = large-flat ] && [ "$decided" != 0 ]; then
  echo "FAIL: DDP_TCP_HIERARCHY_LARGE=flat, yet $decided decisions were logged"; exit 1
fi
# Every rank took the ways rank 0's settings allow (measured among them where several), the
# first where each size starts: overlapped segments where DDP_TCP_HIERARCHY_OVERLAP=1, segments
# in turn where 0, flat alone in large-flat.
case "$mode" in
  hierarchical | gloo) want_large="overlapped, flat" ;;
  streams) want_large="split, flat" ;;
  *) want_large=flat ;;
esac
large=$(cat "$out"/host*.log | grep -c "group 'world': hierarchical, .*large all_reduces: $want_large\$")
if [ "$mode" != flat ] && [ "$large" != "$ranks" ]; then
  echo "FAIL: $large of $ranks ranks took large all_reduces: $want_large"; exit 1
fi
# A hierarchy's flat ops take shared memory for their hops within a host (routed_links.h).
routed=$(cat "$out"/host*.log | grep -c "group 'world': flat ops go through shared memory within the host")
if [ "$mode" != flat ] && [ "$routed" != "$ranks" ]; then
  echo "FAIL: $routed of $ranks ranks route flat ops through shared memory within the host"; exit 1
fi
grep -h "test cases:" "$out"/host*.log | head -2
echo "$n hosts x 2 ranks, $mode: ok"
