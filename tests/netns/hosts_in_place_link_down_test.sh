#!/usr/bin/env bash
# Recovery in place when a host is cut off without a reset (tests/netns/hosts.sh,
# elastic_harness.sh): 2 hosts run ddp-launch --nnodes 1:2 (heartbeats 0.2 s x 5), each NPROC
# workers, ddp_elastic_probe --print-steps (a counter all_reduced every 20 ms, committed),
# DDP_TIMEOUT_MS=600000. Once every worker is in the group of 2 x NPROC, host 2's link is taken
# down (no FIN, no RST): host 1's workers then wait in an all_reduce that only the launchers'
# announcement can end, since their sockets would notice the loss only at the link-loss bound
# (keepalive and TCP_USER_TIMEOUT, about 8 s) and their timeout is 10 minutes. Host 1's workers
# must be released by the abort (the log shows the Aborted op with the announcement's reason, and
# no lost-peer error), go on in place (same PIDs, a group of NPROC of a later round) and finish,
# every one with the value the steps imply (elastic_harness.sh, assert_done_implied: the world of
# each step summed, a rolled-back step counted as retaken; so equal on every rank). With NPROC 2
# the world group is hierarchical (the debug log says so): the abort reaches the op through its
# child groups. A few seconds. Exit 77 (Skipped) when not root or a tool is missing.
# usage: hosts_in_place_link_down_test.sh <bin dir> <tests bin dir> <source dir> [NPROC]
set -uo pipefail
bin=$1 tbin=$2 src=$3 nproc=${4:-1}
. "$src/tests/netns/elastic_harness.sh"
harness_up linkdown$nproc 2
export DDP_TIMEOUT_MS=600000
[ "$nproc" = 1 ] || export DDP_LOG_LEVEL=debug
world=$((2 * nproc))

for h in $(seq 1 $n); do
  launch "$h" --nnodes 1:2 --nproc-per-node "$nproc" "$tbin/ddp_elastic_probe" 150 20 --print-steps
done
full() { cat "$out"/host*.log 2> /dev/null | grep -c "group pid=.* world=$world\$"; }
wait_until 15 "no group of $world" '[ "$(full)" = $world ]'
befores=$(grep -o "group pid=[0-9]* .*world=$world\$" "$out/host1.log" | sed 's/group pid=\([0-9]*\).*/\1/' | sort)
if [ "$nproc" != 1 ]; then
  grep -q "group 'world': hierarchical, 2 hosts x $nproc ranks" "$out/host1.log" ||
    fail "the world group of 2 hosts x $nproc ranks was not hierarchical"
fi
$hosts link "$p" 2 down || fail "could not take host 2's link down"
start=$(date +%s%N)
wait "${pids[0]}"; rc1=$?
ms=$((($(date +%s%N) - start) / 1000000))
log=$out/host1.log
[ $rc1 = 0 ] || fail "host 1 exited $rc1"
grep -q "${p}h2) lost: no heartbeat" "$log" || fail "host 1 did not name host 2 as lost"
grep -q "with the workers in place" "$log" || fail "host 1 did not keep its workers"
grep -q "aborted: round [0-9]* ended: changed: .*${p}h2) lost" "$log" ||
  fail "host 1's worker was not released by the abort (no Aborted op naming the announcement)"
! grep -q " was lost: " "$log" || fail "host 1's worker saw the link's loss before the announcement"
if [ "$nproc" != 1 ]; then
  grep -q "on group 'world/across[0-9]*': aborted: round" "$log" ||
    fail "no op of a cross-host child group was aborted"
fi
for before in $befores; do
  after=$(grep -o "group pid=$before round=[0-9]* rank=[0-9]* world=$nproc\$" "$log" | tail -1)
  [ -n "$after" ] || fail "host 1's worker $before formed no group of $nproc (restarted?)"
  grep -q "done pid=$before .*steps=150" "$log" || fail "host 1's worker $before did not finish its 150 steps"
  ! kill -0 "$before" 2> /dev/null || fail "host 1's worker $before is still alive"
done
! grep -q 'restarting the workers' "$log" || fail "host 1 restarted its workers"
[ "$(grep -c '^done pid=' "$log")" = "$nproc" ] || fail "not all of host 1's $nproc worker(s) finished"
assert_done_implied 150 1
grep "(seq [0-9]*) on group .*: aborted: round" "$log" | cut -c1-160 | sed "s/^/  /"
# (Not assert_clean: host 2's launcher and workers, cut off, are still alive; the trap kills them.)
echo "host 2's link down: host 1's $nproc worker(s) ($(echo $befores)) were aborted out of their all_reduce by the" \
  "announcement, went on in place in a group of $nproc and finished with value $implied, what the steps imply, ${ms} ms: ok"
